// CudaDevice: opening a GPU, its lifetime, pinned memory, streams, copies and events. Imports
// live in cuda_import.cc, the reduction kernels in cuda_reduce.cc.
#include "daemon/device/cuda/cuda_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "daemon/device/cuda/cuda_api.h"

namespace hc::device {
namespace {

// True when [a, a+n) and [b, b+n) share a byte.
bool overlaps(const void* a, const void* b, size_t n) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return n > 0 && x < y + n && y < x + n;
}

CUdeviceptr devicePtr(const void* ptr) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
}

// "0000:3B:00.0" -> "0000:3b:00.0", as sysfs (and discovery) spell it.
std::string lowerCase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

CudaDevice::CudaDevice(std::shared_ptr<CudaDriver> driver, int ordinal)
    : driver_(std::move(driver)), ordinal_(ordinal) {
  info_.index = ordinal;
  info_.vendor = Vendor::Nvidia;
  info_.backend = "cuda";
  caps_.ipcImport = true;
  caps_.reduceKernels = false;  // until loadKernels() succeeds
  caps_.streamOrdering = true;
  caps_.pinnedStaging = true;
  // cuMemcpyAsync infers each side's device from the address (unified addressing, which every
  // 64-bit Linux context has), so one copy reaches another GPU's memory.
  caps_.peerCopy = true;
  // A transport built with CUDA support may be lent this GPU's memory; whether it moves it
  // zero-copy (GPUDirect RDMA) the daemon probes before it does (staging/direct_probe.h).
  caps_.transportMemory = {MemoryType::Cuda};
}

Result<std::unique_ptr<CudaDevice>> CudaDevice::open(std::shared_ptr<CudaDriver> driver,
                                                     int ordinal) {
  std::unique_ptr<CudaDevice> device(new CudaDevice(std::move(driver), ordinal));
  HC_RETURN_IF_ERROR(device->openContext());
  device->loadKernels();
  return device;
}

Status CudaDevice::openContext() {
  const CudaDriver& d = *driver_;
  CUdevice dev = 0;
  HC_CUDA_TRY(d, deviceGet, &dev, ordinal_);
  cuDevice_ = dev;
  char name[256] = {};
  HC_CUDA_TRY(d, deviceGetName, name, static_cast<int>(sizeof(name) - 1), dev);
  size_t totalBytes = 0;
  HC_CUDA_TRY(d, deviceTotalMem, &totalBytes, dev);
  char busId[32] = {};
  HC_CUDA_TRY(d, deviceGetPCIBusId, busId, static_cast<int>(sizeof(busId) - 1), dev);
  info_.model = name;
  info_.memoryBytes = totalBytes;
  info_.pciBusId = lowerCase(busId);

  // Before any context exists: a context of ours on an exclusive GPU would lock the training
  // process out of it.
  const std::string which =
      "GPU " + std::to_string(ordinal_) + " (" + info_.model + ", " + info_.pciBusId + ")";
  int mode = CU_COMPUTEMODE_DEFAULT;
  HC_CUDA_TRY(d, deviceGetAttribute, &mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev);
  if (mode == CU_COMPUTEMODE_EXCLUSIVE_PROCESS) {
    return unavailable(which +
                       " is in EXCLUSIVE_PROCESS compute mode: only one process may hold a "
                       "context on it, and the daemon and the training process each need one, so "
                       "the daemon leaves it alone (`nvidia-smi -i " +
                       std::to_string(ordinal_) + " -c DEFAULT` lets the daemon serve it)");
  }
  if (mode == CU_COMPUTEMODE_PROHIBITED) {
    return unavailable(which +
                       " is in PROHIBITED compute mode: no process may create a context "
                       "on it");
  }
  int multiprocessors = 0;
  HC_CUDA_TRY(d, deviceGetAttribute, &multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
              dev);
  multiprocessors_ = std::max(1, multiprocessors);

  CUcontext context = nullptr;
  HC_CUDA_TRY(d, devicePrimaryCtxRetain, &context, dev);
  context_ = context;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  size_t freeBytes = 0;
  size_t total = 0;
  HC_CUDA_TRY(d, memGetInfo, &freeBytes, &total);
  memoryUse_.totalBytes = total;
  memoryUse_.freeAtContextBytes = freeBytes;
  memoryUse_.freeAfterSetupBytes = freeBytes;
  return okStatus();
}

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  const CudaDriver& d = *driver_;
  auto warnIf = [&](CUresult result, const char* call) {
    if (result != CUDA_SUCCESS) spdlog::warn("CUDA GPU {}: {}", ordinal_, d.describe(result, call));
  };
  {
    ScopedContext scope(d, context_);
    if (!scope.status().isOk()) {
      spdlog::warn("CUDA GPU {}: cannot clean up: {}", ordinal_, scope.status().message());
    } else {
      // Pending work first, so that nothing below is still in use by the GPU.
      for (auto& [id, stream] : streams_)
        warnIf(d.streamSynchronize(stream), "cuStreamSynchronize");
      for (auto& [id, event] : events_) warnIf(d.eventDestroy(event), d.eventDestroy.name);
      for (CUevent event : idleEvents_) warnIf(d.eventDestroy(event), d.eventDestroy.name);
      for (auto& [id, stream] : streams_) warnIf(d.streamDestroy(stream), d.streamDestroy.name);
      for (auto& [id, import] : imports_) {
        Status unmapped = unmapImport(import);
        if (!unmapped.isOk()) spdlog::warn("CUDA GPU {}: {}", ordinal_, unmapped.message());
      }
      for (auto& [ptr, bytes] : pinned_) warnIf(d.memFreeHost(ptr), d.memFreeHost.name);
      for (auto& [ptr, bytes] : allocations_) {
        warnIf(d.memFree(reinterpret_cast<CUdeviceptr>(ptr)), d.memFree.name);
      }
      if (module_ != nullptr) warnIf(d.moduleUnload(module_), d.moduleUnload.name);
    }
  }
  warnIf(d.devicePrimaryCtxRelease(cuDevice_), d.devicePrimaryCtxRelease.name);
}

Result<void*> CudaDevice::allocPinned(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocPinned of 0 bytes");
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  void* ptr = nullptr;
  // Portable: usable from every context, so another GPU's copies run at DMA speed too. Device-
  // mapped: kernels may read it directly.
  HC_CUDA_TRY(d, memHostAlloc, &ptr, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_.emplace(ptr, bytes);
  return ptr;
}

Status CudaDevice::freePinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pinned_.erase(ptr) == 0) return notFound("freePinned: not a pinned allocation");
  }
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  HC_CUDA_TRY(d, memFreeHost, ptr);
  return okStatus();
}

Result<void*> CudaDevice::allocDevice(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocDevice of 0 bytes");
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  CUdeviceptr ptr = 0;
  HC_CUDA_TRY(d, memAlloc, &ptr, bytes);  // 256-byte aligned
  void* p = reinterpret_cast<void*>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.emplace(p, bytes);
  return p;
}

Status CudaDevice::freeDevice(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(ptr) == 0) return notFound("freeDevice: not a device allocation");
  }
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  HC_CUDA_TRY(d, memFree, reinterpret_cast<CUdeviceptr>(ptr));
  return okStatus();
}

Result<StreamId> CudaDevice::createStream() {
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  CUstream stream = nullptr;
  // Non-blocking: the legacy default stream, which other code in the process may use, must not
  // serialize with the daemon's work.
  HC_CUDA_TRY(d, streamCreate, &stream, CU_STREAM_NON_BLOCKING);
  std::lock_guard<std::mutex> lock(mutex_);
  StreamId id = nextStream_++;
  streams_.emplace(id, stream);
  return id;
}

Status CudaDevice::destroyStream(StreamId stream) {
  CUstream handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
    handle = it->second;
    streams_.erase(it);
  }
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  // A failed stream (sticky error) is destroyed all the same; its error is reported.
  const CUresult synced = d.streamSynchronize(handle);
  HC_CUDA_TRY(d, streamDestroy, handle);
  if (synced != CUDA_SUCCESS) return d.toStatus(synced, d.streamSynchronize.name);
  return okStatus();
}

Result<CUstream> CudaDevice::findStream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
  return it->second;
}

Status CudaDevice::copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) {
  Result<CUstream> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  if (bytes == 0 || dst == src) return okStatus();
  if (dst == nullptr || src == nullptr) return invalidArgument("copyAsync with a null buffer");
  if (overlaps(dst, src, bytes)) return invalidArgument("copyAsync ranges partially overlap");
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  // Unified addressing: the driver tells device, pinned and pageable host addresses apart.
  HC_CUDA_TRY(d, memcpyAsync, devicePtr(dst), devicePtr(src), bytes, *handle);
  return okStatus();
}

Result<EventId> CudaDevice::recordEvent(StreamId stream) {
  Result<CUstream> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  CUevent event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idleEvents_.empty()) {
      event = idleEvents_.back();
      idleEvents_.pop_back();
    }
  }
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  // Without timing an event is a cheap marker, which is all completion polling needs.
  if (event == nullptr) HC_CUDA_TRY(d, eventCreate, &event, CU_EVENT_DISABLE_TIMING);
  const CUresult recorded = d.eventRecord(event, *handle);
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorded != CUDA_SUCCESS) {
    idleEvents_.push_back(event);
    return d.toStatus(recorded, d.eventRecord.name);
  }
  EventId id = nextEvent_++;
  events_.emplace(id, event);
  return id;
}

Result<bool> CudaDevice::queryEvent(EventId event) {
  CUevent handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end()) return notFound("unknown event " + std::to_string(event));
    handle = it->second;
  }
  // Polled on the data path: cuEventQuery needs no current context, so none is pushed.
  const CUresult result = driver_->eventQuery(handle);
  if (result == CUDA_SUCCESS) return true;
  if (result == CUDA_ERROR_NOT_READY) return false;
  return driver_->toStatus(result, driver_->eventQuery.name);
}

Status CudaDevice::releaseEvent(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end()) return notFound("unknown event " + std::to_string(event));
  // Kept for the next recordEvent(): re-recording an event is allowed even while a previous
  // record is pending.
  idleEvents_.push_back(it->second);
  events_.erase(it);
  return okStatus();
}

Status CudaDevice::synchronize(StreamId stream) {
  Result<CUstream> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  HC_CUDA_TRY(d, streamSynchronize, *handle);
  return okStatus();
}

}  // namespace hc::device
