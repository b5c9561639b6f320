// HipDevice: one AMD GPU behind the Device interface, through the HIP runtime of a dlopened
// libamdhip64 (hip_api.h). Devices come from probeHipDevices() (hip_probe.h).
//
// What it does with the GPU:
// - makes its device current on the calling thread around each HIP call (HIP's current device is
//   per thread, and the daemon's threads serve several GPUs);
// - imports clients' allocations by legacy IPC handle (hipIpcOpenMemHandle, peers enabled
//   lazily; the opened allocation must be at least as large as the client claims,
//   hipMemGetAddressRange) or, for VMM allocations, by POSIX fd (hipMemImportFromShareableHandle,
//   mapped into an address range the daemon reserves; the mapping fails when the allocation is
//   smaller than claimed);
// - pinned staging memory (hipHostMalloc, portable), non-blocking streams, copies
//   (hipMemcpyAsync: any pair of device, pinned or host addresses), events without timing;
// - reductions with the kernels of daemon/device/kernels, embedded as a code-object bundle
//   (hip_kernel_image.h). When the runtime cannot load them (the GPU is none of the build's
//   HC_HIP_ARCHS), capabilities().reduceKernels is false, reduceAsync() fails, and
//   stagingFallbackReason() says why: callers stage reductions through host memory.
//
// This header does not include the HIP headers: the daemon includes it without them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/device/device.h"
#include "daemon/device/kernels/reduce_args.h"

// The runtime's opaque handle types (hip_runtime_api.h declares the same tags).
struct ihipStream_t;
struct ihipEvent_t;
struct ihipModule_t;
struct ihipModuleSymbol_t;

namespace hc::device {

struct HipApi;

// Device memory seen by the daemon, from hipMemGetInfo. The first reading is taken right after the
// device became current, when the runtime has already set up its context on it: that
// reservation is in it and cannot be told apart from other processes' use.
struct HipMemoryUse {
  uint64_t totalBytes = 0;
  uint64_t freeAtContextBytes = 0;   // right after the device became current
  uint64_t freeAfterSetupBytes = 0;  // after the daemon's setup (the kernels' module)
  // What the daemon's setup took beyond the runtime's context.
  uint64_t setupBytes() const {
    return freeAtContextBytes > freeAfterSetupBytes ? freeAtContextBytes - freeAfterSetupBytes : 0;
  }
};

// Threads: every method may be called from any thread (Device's rules). Bookkeeping is under one
// mutex that is never held across a HIP call.
class HipDevice final : public Device {
 public:
  // Opens GPU `ordinal` (HIP's numbering, after HIP_VISIBLE_DEVICES): reads its properties and
  // loads the reduction kernels from `kernelImage` (reduceKernelBundle(); an empty span leaves
  // reductions to host staging). The ordinal becomes info().index. probeHipDevices() calls it for
  // every GPU the runtime reports.
  [[nodiscard]] static Result<std::unique_ptr<HipDevice>> open(
      std::shared_ptr<const HipApi> api, int ordinal, std::span<const uint8_t> kernelImage);
  // Releases what callers left behind, in reverse order of creation: events, streams (after
  // their work), imports, pinned memory, the module. Failures are logged, never thrown.
  ~HipDevice() override;
  HipDevice(const HipDevice&) = delete;
  HipDevice& operator=(const HipDevice&) = delete;

  // Empty when the reduction kernels loaded; otherwise why they did not ("hipModuleLoadData:
  // hipErrorNoBinaryForGpu ...; the kernels are built for gfx90a, gfx940"), for metrics and
  // `hcctl devices`.
  const std::string& stagingFallbackReason() const { return stagingFallbackReason_; }
  // The daemon's own footprint on this GPU, measured when the device was opened.
  const HipMemoryUse& memoryUse() const { return memoryUse_; }
  // The HIP device ordinal (equal to info().index).
  int ordinal() const { return ordinal_; }

  // hc::Device
  const DeviceInfo& info() const override { return info_; }
  const Capabilities& capabilities() const override { return caps_; }
  // BufferHandle of MemoryType::Hip: either `bytes` is the 64-byte hipIpcMemHandle_t and no fd,
  // or `fd` is a VMM allocation's POSIX fd and `bytes` is empty. `size` is what the client claims
  // the allocation holds: InvalidArgument when the allocation is smaller (the mapping is undone).
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
  // A failure reported here (work before the event faulted) also fails the event's stream: HIP
  // errors are not sticky per stream the way CUDA's are, so the device keeps Device's promise
  // itself, and later work on that stream returns DeviceError until it is destroyed.
  Result<bool> queryEvent(EventId event) override;
  Status releaseEvent(EventId event) override;
  Status synchronize(StreamId stream) override;

 private:
  struct Stream {
    ihipStream_t* handle = nullptr;
    std::string failure;  // why the stream failed; empty while it is usable
  };
  struct Event {
    ihipEvent_t* handle = nullptr;
    StreamId stream = 0;  // recorded on
  };
  struct Import {
    void* ptr = nullptr;
    size_t mappedBytes = 0;  // VMM: the reserved and mapped range
    bool vmm = false;        // false: a legacy IPC mapping
  };

  HipDevice(std::shared_ptr<const HipApi> api, int ordinal);
  Status makeCurrent() const;
  Status readProperties();
  // Loads the embedded kernels; on failure records stagingFallbackReason_ and logs it once.
  void loadKernels(std::span<const uint8_t> kernelImage);
  Result<ihipStream_t*> findStream(StreamId stream);
  void failStream(StreamId stream, const Status& status);
  Status launchReduce(ihipStream_t* stream, uint32_t dtype, const kernels::ReduceArgs& args);
  // hip_import.cc. The unmaps run with the device current.
  Result<ImportedBuffer> importLegacyIpc(const BufferHandle& handle);
  Result<ImportedBuffer> importVmmFd(const BufferHandle& handle);
  Result<ImportedBuffer> remember(const Import& import, uint64_t size);
  Status unmapImport(const Import& import);

  const std::shared_ptr<const HipApi> api_;
  const int ordinal_;
  int multiprocessors_ = 1;  // compute units, for the grid size
  ihipModule_t* module_ = nullptr;
  ihipModuleSymbol_t* kernels_[kernels::kNumKernelDtypes] = {};
  DeviceInfo info_;
  Capabilities caps_;
  std::string stagingFallbackReason_;
  HipMemoryUse memoryUse_;

  std::mutex mutex_;
  std::unordered_map<StreamId, Stream> streams_;   // guarded by mutex_
  std::unordered_map<EventId, Event> events_;      // guarded by mutex_
  std::vector<ihipEvent_t*> idleEvents_;           // guarded by mutex_; for reuse
  std::unordered_map<uint64_t, Import> imports_;   // guarded by mutex_; by ImportedBuffer::id
  std::unordered_map<void*, size_t> pinned_;       // guarded by mutex_; pointer -> bytes
  std::unordered_map<void*, size_t> allocations_;  // guarded by mutex_; allocDevice()'s
  StreamId nextStream_ = 1;                        // guarded by mutex_
  EventId nextEvent_ = 1;                          // guarded by mutex_
  uint64_t nextImport_ = 1;                        // guarded by mutex_
};

}  // namespace hc::device
