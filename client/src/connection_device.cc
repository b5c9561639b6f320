// Connection's device-memory half: registering device allocations with the daemon (MemRegister)
// and naming buffers in them by (region, offset).
#include <unistd.h>

#include <cstring>

#include "client/src/connection.h"
#include "common/ipc/frames.h"

namespace hc::client {

Result<ipc::BufferRef> Connection::deviceRef(DeviceRuntime* rt, const DevicePointer& at,
                                             const void* p, uint64_t bytes) {
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
  uint32_t region = 0;
  {
    std::lock_guard<std::mutex> lock(deviceMutex_);
    if (auto it = regions_.find({rt->name(), at.allocationId}); it != regions_.end()) {
      region = it->second;
    }
  }
  if (region == 0) {
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
    region = ipc::frameAs<ipc::MemRegisterReplyFrame>(*reply).region;
    std::lock_guard<std::mutex> lock(deviceMutex_);
    regions_[{rt->name(), at.allocationId}] = region;
  }
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::Device);
  ref.offset = offset;
  ref.region = region;
  return ref;
}

void Connection::forgetDeviceAllocation(const char* runtime, uint64_t allocationId) {
  uint32_t region = 0;
  {
    std::lock_guard<std::mutex> lock(deviceMutex_);
    auto it = regions_.find({runtime, allocationId});
    if (it == regions_.end()) return;
    region = it->second;
    regions_.erase(it);
  }
  if (dead()) return;
  // The daemon keeps the mapping until the operations that use it finished.
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::MemUnregisterFrame>(ipc::FrameType::MemUnregister, id);
  f.region = region;
  [[maybe_unused]] auto reply = request(ipc::frameBytes(f), id);
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
