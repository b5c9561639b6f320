// HipDevice: opening a GPU, its lifetime, pinned memory, streams, copies and events. Imports
// live in hip_import.cc, the reduction kernels in hip_reduce.cc.
#include "daemon/device/hip/hip_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "daemon/device/hip/hip_api.h"

namespace hc::device {
namespace {

// Released events kept for reuse, at most: beyond this they are destroyed.
constexpr size_t kMaxIdleEvents = 256;

// True when [a, a+n) and [b, b+n) share a byte.
bool overlaps(const void* a, const void* b, size_t n) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return n > 0 && x < y + n && y < x + n;
}

// "0000:C1:00.0" -> "0000:c1:00.0", as sysfs (and discovery) spell it.
std::string lowerCase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

HipDevice::HipDevice(std::shared_ptr<const HipApi> api, int ordinal)
    : api_(std::move(api)), ordinal_(ordinal) {
  info_.index = ordinal;
  info_.vendor = Vendor::Amd;
  info_.backend = "hip";
  caps_.ipcImport = true;
  caps_.reduceKernels = false;  // until loadKernels() succeeds
  caps_.streamOrdering = true;
  caps_.pinnedStaging = true;
  // hipMemcpyDefault infers each side's device from the address (unified addressing), so one
  // copy reaches another GPU's memory.
  caps_.peerCopy = true;
  // A transport built with ROCm support may be lent this GPU's memory; whether it moves it
  // zero-copy (ROCm peer memory) the daemon probes before it does (staging/direct_probe.h).
  caps_.transportMemory = {MemoryType::Hip};
}

Result<std::unique_ptr<HipDevice>> HipDevice::open(std::shared_ptr<const HipApi> api, int ordinal,
                                                   std::span<const uint8_t> kernelImage) {
  std::unique_ptr<HipDevice> device(new HipDevice(std::move(api), ordinal));
  HC_RETURN_IF_ERROR(device->readProperties());
  device->loadKernels(kernelImage);
  return device;
}

Status HipDevice::makeCurrent() const {
  HC_HIP_TRY(*api_, hipSetDevice, ordinal_);
  return okStatus();
}

Status HipDevice::readProperties() {
  const HipApi& hip = *api_;
  hipDevice_t device = 0;
  HC_HIP_TRY(hip, hipDeviceGet, &device, ordinal_);
  char name[256] = {};
  HC_HIP_TRY(hip, hipDeviceGetName, name, static_cast<int>(sizeof(name) - 1), device);
  size_t totalBytes = 0;
  HC_HIP_TRY(hip, hipDeviceTotalMem, &totalBytes, device);
  char busId[32] = {};
  HC_HIP_TRY(hip, hipDeviceGetPCIBusId, busId, static_cast<int>(sizeof(busId) - 1), ordinal_);
  info_.model = name;
  info_.memoryBytes = totalBytes;
  info_.pciBusId = lowerCase(busId);
  int multiprocessors = 0;
  HC_HIP_TRY(hip, hipDeviceGetAttribute, &multiprocessors, hipDeviceAttributeMultiprocessorCount,
             ordinal_);
  multiprocessors_ = std::max(1, multiprocessors);

  HC_RETURN_IF_ERROR(makeCurrent());
  size_t freeBytes = 0;
  size_t total = 0;
  HC_HIP_TRY(hip, hipMemGetInfo, &freeBytes, &total);
  memoryUse_.totalBytes = total;
  memoryUse_.freeAtContextBytes = freeBytes;
  memoryUse_.freeAfterSetupBytes = freeBytes;
  return okStatus();
}

HipDevice::~HipDevice() {
  const HipApi& hip = *api_;
  auto warnIf = [&](hipError_t error, const char* call) {
    if (error != hipSuccess) spdlog::warn("HIP GPU {}: {}", ordinal_, hip.describe(error, call));
  };
  if (hip.hipSetDevice(ordinal_) != hipSuccess) {
    spdlog::warn("HIP GPU {}: cannot clean up: the device cannot be made current", ordinal_);
    return;
  }
  // Pending work first, so that nothing below is still in use by the GPU.
  for (auto& [id, stream] : streams_) {
    warnIf(hip.hipStreamSynchronize(stream.handle), "hipStreamSynchronize");
  }
  for (auto& [id, event] : events_) warnIf(hip.hipEventDestroy(event.handle), "hipEventDestroy");
  for (ihipEvent_t* event : idleEvents_) warnIf(hip.hipEventDestroy(event), "hipEventDestroy");
  for (auto& [id, stream] : streams_) {
    warnIf(hip.hipStreamDestroy(stream.handle), "hipStreamDestroy");
  }
  for (auto& [id, import] : imports_) {
    Status unmapped = unmapImport(import);
    if (!unmapped.isOk()) spdlog::warn("HIP GPU {}: {}", ordinal_, unmapped.message());
  }
  for (auto& [ptr, bytes] : pinned_) warnIf(hip.hipHostFree(ptr), "hipHostFree");
  for (auto& [ptr, bytes] : allocations_) warnIf(hip.hipFree(ptr), "hipFree");
  if (module_ != nullptr) warnIf(hip.hipModuleUnload(module_), "hipModuleUnload");
}

Result<void*> HipDevice::allocPinned(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocPinned of 0 bytes");
  HC_RETURN_IF_ERROR(makeCurrent());
  void* ptr = nullptr;
  // Portable: pinned for every HIP device of the process, so another GPU's copies run at DMA
  // speed too.
  HC_HIP_TRY(*api_, hipHostMalloc, &ptr, bytes, hipHostMallocPortable);
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_.emplace(ptr, bytes);
  return ptr;
}

Status HipDevice::freePinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pinned_.erase(ptr) == 0) return notFound("freePinned: not a pinned allocation");
  }
  HC_RETURN_IF_ERROR(makeCurrent());
  HC_HIP_TRY(*api_, hipHostFree, ptr);
  return okStatus();
}

Result<void*> HipDevice::allocDevice(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocDevice of 0 bytes");
  HC_RETURN_IF_ERROR(makeCurrent());
  void* ptr = nullptr;
  HC_HIP_TRY(*api_, hipMalloc, &ptr, bytes);  // 256-byte aligned
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.emplace(ptr, bytes);
  return ptr;
}

Status HipDevice::freeDevice(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(ptr) == 0) return notFound("freeDevice: not a device allocation");
  }
  HC_RETURN_IF_ERROR(makeCurrent());
  HC_HIP_TRY(*api_, hipFree, ptr);
  return okStatus();
}

Result<StreamId> HipDevice::createStream() {
  HC_RETURN_IF_ERROR(makeCurrent());
  hipStream_t stream = nullptr;
  // Non-blocking: the null stream, which other code in the process may use, must not serialize
  // with the daemon's work.
  HC_HIP_TRY(*api_, hipStreamCreateWithFlags, &stream, hipStreamNonBlocking);
  std::lock_guard<std::mutex> lock(mutex_);
  StreamId id = nextStream_++;
  streams_.emplace(id, Stream{stream, {}});
  return id;
}

Status HipDevice::destroyStream(StreamId stream) {
  hipStream_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
    handle = it->second.handle;
    streams_.erase(it);
  }
  const HipApi& hip = *api_;
  HC_RETURN_IF_ERROR(makeCurrent());
  // Wait first: the stream's buffers may be released as soon as this returns. A failed stream is
  // destroyed all the same; its error is reported.
  const hipError_t synced = hip.hipStreamSynchronize(handle);
  HC_HIP_TRY(hip, hipStreamDestroy, handle);
  if (synced != hipSuccess) return hip.toStatus(synced, "hipStreamSynchronize");
  return okStatus();
}

Result<ihipStream_t*> HipDevice::findStream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
  if (!it->second.failure.empty()) {
    return Status(Code::DeviceError, "stream " + std::to_string(stream) + " failed earlier (" +
                                         it->second.failure + "); destroy it");
  }
  return it->second.handle;
}

void HipDevice::failStream(StreamId stream, const Status& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it != streams_.end() && it->second.failure.empty()) it->second.failure = status.message();
}

Status HipDevice::copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) {
  Result<hipStream_t> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  if (bytes == 0 || dst == src) return okStatus();
  if (dst == nullptr || src == nullptr) return invalidArgument("copyAsync with a null buffer");
  if (overlaps(dst, src, bytes)) return invalidArgument("copyAsync ranges partially overlap");
  HC_RETURN_IF_ERROR(makeCurrent());
  // hipMemcpyDefault: unified addressing tells device, pinned and pageable host memory apart.
  HC_HIP_TRY(*api_, hipMemcpyAsync, dst, src, bytes, hipMemcpyDefault, *handle);
  return okStatus();
}

Result<EventId> HipDevice::recordEvent(StreamId stream) {
  Result<hipStream_t> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  hipEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idleEvents_.empty()) {
      event = idleEvents_.back();
      idleEvents_.pop_back();
    }
  }
  const HipApi& hip = *api_;
  HC_RETURN_IF_ERROR(makeCurrent());
  // Without timing an event is a cheap marker, which is all completion polling needs.
  if (event == nullptr) HC_HIP_TRY(hip, hipEventCreateWithFlags, &event, hipEventDisableTiming);
  const hipError_t recorded = hip.hipEventRecord(event, *handle);
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorded != hipSuccess) {
    idleEvents_.push_back(event);
    return hip.toStatus(recorded, "hipEventRecord");
  }
  EventId id = nextEvent_++;
  events_.emplace(id, Event{event, stream});
  return id;
}

Result<bool> HipDevice::queryEvent(EventId event) {
  Event state;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end()) return notFound("unknown event " + std::to_string(event));
    state = it->second;
  }
  // Polled on the data path: hipEventQuery needs no current device, so none is set.
  const hipError_t result = api_->hipEventQuery(state.handle);
  if (result == hipSuccess) return true;
  if (result == hipErrorNotReady) return false;
  Status status = api_->toStatus(result, "hipEventQuery");
  failStream(state.stream, status);
  return status;
}

Status HipDevice::releaseEvent(EventId event) {
  hipEvent_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end()) return notFound("unknown event " + std::to_string(event));
    handle = it->second.handle;
    events_.erase(it);
    // Kept for the next recordEvent(): re-recording an event is allowed even while a previous
    // record is pending.
    if (idleEvents_.size() < kMaxIdleEvents) {
      idleEvents_.push_back(handle);
      return okStatus();
    }
  }
  HC_HIP_TRY(*api_, hipEventDestroy, handle);
  return okStatus();
}

Status HipDevice::synchronize(StreamId stream) {
  Result<hipStream_t> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  HC_RETURN_IF_ERROR(makeCurrent());
  const hipError_t synced = api_->hipStreamSynchronize(*handle);
  if (synced == hipSuccess) return okStatus();
  Status status = api_->toStatus(synced, "hipStreamSynchronize");
  failStream(stream, status);
  return status;
}

}  // namespace hc::device
