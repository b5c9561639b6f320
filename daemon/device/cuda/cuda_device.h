// CudaDevice: one NVIDIA GPU behind the Device interface, through the CUDA driver API of a
// dlopened libcuda.so.1 (cuda_api.h). Devices come from probeCudaDevices() (cuda_probe.h).
//
// What it does with the GPU:
// - holds the device's primary context (shared with any other user of the driver in this
//   process), made current around each driver call;
// - imports clients' allocations: a legacy IPC handle (cuIpcOpenMemHandle, peers enabled lazily)
//   whose allocation must be at least as large as the client claims, or a VMM POSIX fd
//   (cuMemImportFromShareableHandle, mapped and made read-write for this device);
// - pinned staging memory (cuMemHostAlloc, portable and device-mapped), non-blocking streams,
//   copies (cuMemcpyAsync: any pair of device, pinned or host addresses), events without timing;
// - reductions with the kernels of daemon/device/kernels, embedded as a fatbin. When the driver
//   cannot load them (an older driver cannot JIT newer PTX), capabilities().reduceKernels is
//   false, reduceAsync() fails, and stagingFallbackReason() says why: callers stage reductions
//   through host memory.
//
// This header does not include cuda.h: the daemon includes it without the toolkit's headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/device/device.h"
#include "daemon/device/kernels/reduce_args.h"

// The driver's opaque handle types (cuda.h declares the same tags).
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;

namespace hc::device {

class CudaDriver;

// Device memory seen by the daemon, from cuMemGetInfo. The driver reports free memory only once a
// context is current, so the first reading is taken right after the daemon's primary context
// became current: the context's own reservation (hundreds of MiB on recent GPUs) is already in
// it and cannot be told apart from other processes' use without NVML's per-process accounting.
struct CudaMemoryUse {
  uint64_t totalBytes = 0;
  uint64_t freeAtContextBytes = 0;   // right after the context became current
  uint64_t freeAfterSetupBytes = 0;  // after the daemon's setup (the kernels' module)
  // What the daemon's setup took beyond its context.
  uint64_t setupBytes() const {
    return freeAtContextBytes > freeAfterSetupBytes ? freeAtContextBytes - freeAfterSetupBytes : 0;
  }
};

// Threads: every method may be called from any thread (Device's rules). Bookkeeping is under one
// mutex that is never held across a driver call that waits for the GPU.
class CudaDevice final : public Device {
 public:
  // Opens GPU `ordinal`: checks its compute mode, retains its primary context, loads the kernels.
  // Unavailable when the daemon must not or cannot hold a context on it (EXCLUSIVE_PROCESS or
  // PROHIBITED compute mode; the message says why and what to change). The ordinal becomes
  // info().index. probeCudaDevices() calls it for every GPU the driver reports.
  [[nodiscard]] static Result<std::unique_ptr<CudaDevice>> open(std::shared_ptr<CudaDriver> driver,
                                                                int ordinal);
  // Releases what callers left behind, in reverse order of creation: events, streams (after
  // their work), imports, pinned memory, the module, and the primary context.
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // Empty when the reduction kernels loaded; otherwise why they did not ("cuModuleLoadData:
  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION ..."), for metrics and `hcctl devices`.
  const std::string& stagingFallbackReason() const { return stagingFallbackReason_; }
  // The daemon's own footprint on this GPU, measured when the device was opened.
  const CudaMemoryUse& memoryUse() const { return memoryUse_; }
  // The CUDA device ordinal (equal to info().index).
  int ordinal() const { return ordinal_; }

  // hc::Device
  const DeviceInfo& info() const override { return info_; }
  const Capabilities& capabilities() const override { return caps_; }
  // BufferHandle of MemoryType::Cuda: fd >= 0 is a VMM POSIX fd (bytes ignored); otherwise
  // `bytes` is the 64-byte cudaIpcMemHandle_t. `size` is what the client claims the allocation
  // holds: InvalidArgument when the driver's allocation is smaller.
  Result<ImportedBuffer> importBuffer(const BufferHandle& handle) override;
  Status releaseBuffer(ImportedBuffer& buffer) override;
  Result<void*> allocPinned(size_t bytes) override;
  Status freePinned(void* ptr) override;
  Result<void*> allocDevice(size_t bytes) override;
  Status freeDevice(void* ptr) override;
  Result<StreamId> createStream() override;
  Status destroyStream(StreamId stream) override;
  Status copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) override;
  // At most kernels::kMaxKernelInputs inputs per launch: more are reduced in successive launches
  // through a partial result in one of the outputs, which is exact for every dtype but the
  // narrow floats (their partial would be rounded to the dtype): those take at most 16 inputs
  // (InvalidArgument beyond). Outputs beyond kMaxKernelOutputs get a copy of the first.
  Status reduceAsync(StreamId stream, const ReduceWork& work) override;
  Result<EventId> recordEvent(StreamId stream) override;
  Result<bool> queryEvent(EventId event) override;
  Status releaseEvent(EventId event) override;
  Status synchronize(StreamId stream) override;

 private:
  struct Import {
    uint64_t devicePtr = 0;
    uint64_t mappedBytes = 0;  // VMM: the reserved and mapped range
    bool vmm = false;          // false: a legacy IPC mapping
  };

  CudaDevice(std::shared_ptr<CudaDriver> driver, int ordinal);
  Status openContext();
  // Loads the embedded kernels; on failure records stagingFallbackReason_ and logs it once.
  void loadKernels();
  Result<ImportedBuffer> importLegacyIpc(const BufferHandle& handle);
  Result<ImportedBuffer> importVmmFd(const BufferHandle& handle);
  Status unmapImport(const Import& import);
  Result<CUstream_st*> findStream(StreamId stream);
  Status launchReduce(CUstream_st* stream, uint32_t dtype, const kernels::ReduceArgs& args);

  std::shared_ptr<CudaDriver> driver_;
  const int ordinal_;
  int cuDevice_ = 0;  // CUdevice
  int multiprocessors_ = 1;
  CUctx_st* context_ = nullptr;  // the primary context, retained
  CUmod_st* module_ = nullptr;
  CUfunc_st* kernels_[kernels::kNumKernelDtypes] = {};
  DeviceInfo info_;
  Capabilities caps_;
  std::string stagingFallbackReason_;
  CudaMemoryUse memoryUse_;

  std::mutex mutex_;
  std::unordered_map<StreamId, CUstream_st*> streams_;  // guarded by mutex_
  std::unordered_map<EventId, CUevent_st*> events_;     // guarded by mutex_
  std::vector<CUevent_st*> idleEvents_;                 // guarded by mutex_; for reuse
  std::unordered_map<uint64_t, Import> imports_;        // guarded by mutex_; by ImportedBuffer::id
  std::unordered_map<void*, size_t> pinned_;            // guarded by mutex_; pointer -> bytes
  std::unordered_map<void*, size_t> allocations_;       // guarded by mutex_; allocDevice()'s
  StreamId nextStream_ = 1;                             // guarded by mutex_
  EventId nextEvent_ = 1;                               // guarded by mutex_
  uint64_t nextImport_ = 1;                             // guarded by mutex_
};

}  // namespace hc::device
