// Connection's device-memory half: registering device allocations with the daemon (MemRegister)
// and naming buffers in them by (region, offset).
#include <unistd.h>

#include <cstring>
#include <optional>

#include "client/src/connection.h"
#include "common/ipc/frames.h"

namespace hc::client {

RegionUses::~RegionUses() {
  if (conn != nullptr && !regions.empty()) conn->endRegionUses(regions);
}

Result<ipc::BufferRef> Connection::deviceRef(DeviceRuntime* rt, const DevicePointer& at,
                                             const void* p, uint64_t bytes, Submission* sub) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  const uint64_t offset = address - at.base;
  if (bytes > at.bytes - offset) {
    return invalidArgument("[" + std::to_string(bytes) + " bytes at offset " +
                           std::to_string(offset) + ") overruns its " + rt->name() +
                           " allocation of " + std::to_string(at.bytes) + " bytes");
  }
  if (daemonMinor_ < 3) {
    return invalidArgument(std::string("is ") + rt->name() +
                           " device memory, which this hetero-commd does not take (protocol 1." +
                           std::to_string(daemonMinor_) + "; device memory needs 1.3)");
  }
  std::optional<uint32_t> region;
  {
    std::lock_guard<std::mutex> lock(deviceMutex_);
    // Another allocation id at this base: the one seen there before was freed behind our back.
    cache_.claimBase(rt->name(), at.base, at.allocationId);
    region = cache_.acquire(rt->name(), at.allocationId);
  }
  unregisterDoomed();
  if (!region) {
    auto added = registerCached(rt, at);
    if (!added.isOk()) return added.status();
    region = *added;
  }
  if (!sub->regionUses) {
    sub->regionUses = std::make_shared<RegionUses>();
    sub->regionUses->conn = this;
  }
  sub->regionUses->regions.push_back(*region);
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::Device);
  ref.offset = offset;
  ref.region = *region;
  return ref;
}

Result<uint32_t> Connection::registerCached(DeviceRuntime* rt, const DevicePointer& at) {
  for (;;) {
    auto region = registerAllocation(rt, at);
    if (region.isOk()) {
      std::lock_guard<std::mutex> lock(deviceMutex_);
      cache_.insert(rt->name(), at.allocationId, at.base, at.bytes, *region);
      return region;
    }
    if (region.status().code() != Code::NoResource) return region.status();
    // The daemon's cap (devices.max_imported_bytes_per_client), which only it knows: release at
    // least this allocation's size of least recently used idle regions and ask again. Regions in
    // use or pinned stay; when nothing is left to release, the refusal stands.
    size_t before = 0;
    {
      std::lock_guard<std::mutex> lock(deviceMutex_);
      before = cache_.size();
      const uint64_t held = cache_.bytes();
      cache_.evictFor(at.bytes, held);
      if (cache_.size() == before) return region.status();
    }
    unregisterDoomed();
  }
}

Result<uint32_t> Connection::registerAllocation(DeviceRuntime* rt, const DevicePointer& at) {
  auto exported = rt->exportAllocation(at);
  if (!exported.isOk()) return exported.status();
  auto f = ipc::makeFrame<ipc::MemRegisterFrame>(ipc::FrameType::MemRegister, 0);
  f.memoryType = at.memoryType;
  f.vendor = at.vendor;
  f.device = at.device;
  if (at.hasPciAddress) {
    // Names the GPU whatever the daemon's *_VISIBLE_DEVICES: ordinals may differ, this does not.
    f.flags |= ipc::kMemRegisterPciAddress;
    f.pciAddress = at.pciAddress;
  }
  f.allocationId = at.allocationId;
  f.bytes = at.bytes;
  f.handleKind = exported->handleKind;
  std::memcpy(f.handle, exported->handle, sizeof(f.handle));
  Result<std::vector<uint8_t>> reply = internalError("not sent");
  {
    std::lock_guard<std::mutex> lock(socketMutex_);
    f.header.requestId = nextFrameId_++;
    const int fd = exported->fd;
    reply = request(ipc::frameBytes(f), f.header.requestId,
                    fd >= 0 ? std::span<const int>(&fd, 1) : std::span<const int>());
  }
  if (exported->fd >= 0) ::close(exported->fd);
  if (!reply.isOk()) return reply.status();
  if (ipc::frameAs<ipc::FrameHeader>(*reply).type !=
      static_cast<uint16_t>(ipc::FrameType::MemRegisterReply)) {
    return internalError("unexpected reply to MemRegister");
  }
  return ipc::frameAs<ipc::MemRegisterReplyFrame>(*reply).region;
}

Status Connection::pinDevice(DeviceRuntime* rt, const DevicePointer& at) {
  Submission none;  // holds the registration's one use until it is pinned
  auto ref = deviceRef(rt, at, reinterpret_cast<const void*>(at.base), 0, &none);
  if (!ref.isOk()) return ref.status();
  std::lock_guard<std::mutex> lock(deviceMutex_);
  if (!cache_.pin(rt->name(), at.allocationId)) {
    return unavailable("the registration was released while it was made (the memory was freed)");
  }
  return okStatus();
}

void Connection::unpinDevice(const char* runtime, uint64_t allocationId) {
  std::lock_guard<std::mutex> lock(deviceMutex_);
  cache_.unpin(runtime, allocationId);
}

void Connection::forgetDeviceAllocation(const char* runtime, uint64_t allocationId) {
  {
    std::lock_guard<std::mutex> lock(deviceMutex_);
    cache_.forget(runtime, allocationId);
  }
  unregisterDoomed();
}

void Connection::endRegionUses(const std::vector<uint32_t>& regions) {
  // Regions doomed while in use are unregistered by the next thread that registers, frees or
  // looks up device memory (unregisterDoomed), not here: this may run under reapMutex_.
  std::lock_guard<std::mutex> lock(deviceMutex_);
  for (uint32_t region : regions) cache_.release(region);
}

void Connection::unregisterDoomed() {
  std::vector<uint32_t> doomed;
  {
    std::lock_guard<std::mutex> lock(deviceMutex_);
    doomed = cache_.takeDoomed();
  }
  if (doomed.empty() || dead()) return;
  // The daemon keeps each mapping until the operations that use it finished.
  std::lock_guard<std::mutex> lock(socketMutex_);
  for (uint32_t region : doomed) {
    uint32_t id = nextFrameId_++;
    auto f = ipc::makeFrame<ipc::MemUnregisterFrame>(ipc::FrameType::MemUnregister, id);
    f.region = region;
    [[maybe_unused]] auto reply = request(ipc::frameBytes(f), id);
  }
}

const std::vector<DeviceRuntime*>& deviceRuntimes() {
  static const std::vector<DeviceRuntime*> runtimes = [] {
    std::vector<DeviceRuntime*> all;
    for (DeviceRuntime* rt : {simRuntime(), cudaRuntime(), hipRuntime()}) {
      if (rt != nullptr) all.push_back(rt);
    }
    return all;
  }();
  return runtimes;
}

}  // namespace hc::client
