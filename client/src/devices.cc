// hc_get_devices: the node's GPUs as the daemon reports them (DeviceQuery, one device per round
// trip), copied into the caller's array only once every reply has arrived and passed its checks.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "common/ipc/frames.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

// The public fields hold what the protocol's hold, so nothing is cut on the way.
static_assert(sizeof(hc_device_info_t::id) == sizeof(ipc::DeviceEntry::id));
static_assert(sizeof(hc_device_info_t::vendor) == sizeof(ipc::DeviceEntry::vendor));
static_assert(sizeof(hc_device_info_t::backend) == sizeof(ipc::DeviceEntry::backend));
static_assert(sizeof(hc_device_info_t::model) == sizeof(ipc::DeviceEntry::model));
static_assert(sizeof(hc_device_info_t::pci_bus_id) == sizeof(ipc::DeviceEntry::pciBusId));
static_assert(sizeof(hc_device_info_t::note) == sizeof(ipc::DeviceEntry::note));

hc_device_info_t infoOf(const ipc::DeviceEntry& e) {
  hc_device_info_t info;
  std::memset(&info, 0, sizeof(info));
  // validateFrame found a NUL in each field; copyText still bounds the copy by the field.
  ipc::copyText(info.id, e.id);
  ipc::copyText(info.vendor, e.vendor);
  ipc::copyText(info.backend, e.backend);
  ipc::copyText(info.model, e.model);
  ipc::copyText(info.pci_bus_id, e.pciBusId);
  info.memory_bytes = e.memoryBytes;
  info.numa_node = e.numaNode < -1 ? -1 : e.numaNode;
  info.measured = (e.flags & ipc::kDeviceMeasured) != 0 ? 1 : 0;
  info.weight = e.weight;
  info.h2d_gbps = e.h2dGBps;
  info.d2h_gbps = e.d2hGBps;
  info.reduce_gbps = e.reduceGBps;
  info.rate_gbps = e.rateGBps;
  ipc::copyText(info.note, e.note);
  return info;
}

}  // namespace

Result<ipc::DeviceQueryReplyFrame> Connection::queryDevice(uint32_t index) {
  if (daemonMinor_ < ipc::kDeviceQueryMinor) {
    return Status{Code::Unsupported,
                  "hetero-commd speaks protocol " + std::to_string(ipc::kProtocolMajor) + "." +
                      std::to_string(daemonMinor_) + ", too old for hc_get_devices (it needs " +
                      std::to_string(ipc::kProtocolMajor) + "." +
                      std::to_string(ipc::kDeviceQueryMinor) + "): update the daemon"};
  }
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::DeviceQueryFrame>(ipc::FrameType::DeviceQuery, id);
  f.index = index;
  auto reply = request(ipc::frameBytes(f), id);
  if (!reply.isOk()) return reply.status();
  if (ipc::frameAs<ipc::FrameHeader>(*reply).type !=
      static_cast<uint16_t>(ipc::FrameType::DeviceQueryReply)) {
    return internalError("unexpected reply to DeviceQuery");
  }
  auto r = ipc::frameAs<ipc::DeviceQueryReplyFrame>(*reply);
  if (r.index != index) {
    return internalError("hetero-commd answered DeviceQuery " + std::to_string(index) +
                         " with device " + std::to_string(r.index));
  }
  return r;
}

}  // namespace hc::client

using namespace hc::client;

extern "C" {

hc_status_t hc_get_devices(hc_device_info_t* devices, int capacity, int* count) {
  if (count == nullptr) return fail(hc::invalidArgument("count is NULL"));
  if (capacity < 0) return fail(hc::invalidArgument("capacity is negative"));
  if (devices == nullptr && capacity > 0) {
    return fail(hc::invalidArgument("devices is NULL but capacity is " + std::to_string(capacity)));
  }
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  auto first = (*conn)->queryDevice(0);
  if (!first.isOk()) return fail(first.status());
  const uint32_t total = first->total;  // at most ipc::kMaxDeviceEntries: fits an int
  const uint32_t wanted = std::min(total, static_cast<uint32_t>(capacity));
  std::vector<hc_device_info_t> infos;
  infos.reserve(wanted);
  for (uint32_t i = 0; i < wanted; ++i) {
    auto r = i == 0 ? std::move(first) : (*conn)->queryDevice(i);
    if (!r.isOk()) return fail(r.status());
    // The list is fixed at the daemon's start: another total is a daemon not to believe.
    if (r->total != total) {
      return fail(hc::internalError("hetero-commd reported " + std::to_string(total) +
                                    " devices, then " + std::to_string(r->total)));
    }
    infos.push_back(infoOf(r->device));
  }
  std::copy(infos.begin(), infos.end(), devices);
  *count = static_cast<int>(total);
  return HC_OK;
}

}  // extern "C"
