// DeviceRuntime: the caller's own device runtime as the client library sees it (the simulated
// device, CUDA, HIP). It tells device pointers from host pointers, exports a device allocation so
// the daemon can map it, and puts the two halves of the stream-ordering protocol on the caller's
// stream: a host function that submits the operation once the stream reaches it, and a wait on
// the operation's done flag, so later work on the stream sees the result without the CPU blocking.
//
// One implementation per runtime: runtime_sim.cc (common/simdev), runtime_cuda.cc (libcuda.so.1),
// runtime_hip.cc (libamdhip64). CUDA and HIP are found only when the process already loaded them
// (dlopen with RTLD_NOLOAD): the client never brings a GPU runtime into a process on its own.
// Depends on common/ only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hc::client {

// What a runtime knows of a device pointer. Values of memoryType and vendor are those of the
// MemRegister frame (ipc::DeviceMemory, ipc::DeviceVendor).
struct DevicePointer {
  uint8_t memoryType = 0;
  uint8_t vendor = 0;
  int32_t device = 0;         // the runtime's ordinal of the device within the vendor
  uint64_t allocationId = 0;  // stable for the allocation's life; never reused while it lives
  uintptr_t base = 0;         // start of the allocation (of its mapping, for VMM memory)
  uint64_t bytes = 0;         // size of the allocation (of its mapping, for VMM memory)
  // The device's PCI address (ipc::packPciAddress), which names it to the daemon whatever
  // *_VISIBLE_DEVICES did to the ordinal. Only when hasPciAddress: a runtime that cannot say
  // leaves the daemon to go by the ordinal.
  bool hasPciAddress = false;
  uint32_t pciAddress = 0;
};

// An exported allocation, ready for a MemRegister frame.
struct ExportedAllocation {
  uint32_t handleKind = 0;   // ipc::HandleKind
  uint8_t handle[64] = {};   // legacy IPC handle bytes (cudaIpcMemHandle_t / hipIpcMemHandle_t)
  int fd = -1;               // owned: a memfd or VMM POSIX fd to pass with SCM_RIGHTS, or -1
};

// Threads: every method may be called from any thread.
class DeviceRuntime {
 public:
  using HostFn = void (*)(void* arg);

  virtual ~DeviceRuntime() = default;
  virtual const char* name() const = 0;  // "sim", "cuda", "hip"

  // true when `ptr` is device memory of this runtime (host-registered or managed memory is not);
  // fills `out`. Never fails: a pointer the runtime does not know is simply not its own.
  virtual bool lookup(const void* ptr, DevicePointer* out) = 0;
  // A handle the daemon can map [p.base, p.base + p.bytes) from: a legacy IPC handle for
  // ordinary allocations, an fd for VMM allocations (cuMemCreate/hipMemCreate, which legacy IPC
  // cannot export) and sim memory. The error names the allocation and why it cannot be shared.
  [[nodiscard]] virtual Result<ExportedAllocation> exportAllocation(const DevicePointer& p) = 0;

  // true when `stream` is a stream of this runtime (the legacy default stream, 0, never is).
  // Every method below that takes a stream also takes 0, the legacy default stream of the calling
  // thread's current context, for communicators ordered on streams (hc_comm_order_on_streams).
  virtual bool ownsStream(void* stream) = 0;
  // Runs fn(arg) on a runtime thread once the stream's earlier work has completed; later work
  // waits for it to return. fn must not call into the runtime.
  [[nodiscard]] virtual Status launchHostFunc(void* stream, HostFn fn, void* arg) = 0;
  // Later work on the stream waits until *word >= value (cuStreamWaitValue32 with GEQ). `word`
  // lies in memory registered with registerHostMemory().
  [[nodiscard]] virtual Status waitValue32(void* stream, std::atomic<uint32_t>* word,
                                           uint32_t value) = 0;
  // Makes [ptr, ptr + bytes) usable by waitValue32 (host-registered, device-mapped memory).
  [[nodiscard]] virtual Status registerHostMemory(void* ptr, size_t bytes) = 0;
  // Device memory of this runtime on the calling thread's current device, as cudaMalloc /
  // hipMalloc give it (ncclMemAlloc's memory), and its release. The default refuses.
  [[nodiscard]] virtual Result<void*> allocateDevice(size_t) {
    return Status{Code::Unsupported, std::string(name()) + " cannot allocate device memory here"};
  }
  [[nodiscard]] virtual Status freeDevice(void*) {
    return Status{Code::Unsupported, std::string(name()) + " cannot free device memory here"};
  }
  // Copies `bytes` of this runtime's device memory at `src` to `dst`, host memory registered
  // with registerHostMemory(), in stream order: after the stream's earlier work, before its later
  // work (a pre-multiplied sum's device scalar, read when its operation reaches the stream).
  // The default refuses.
  [[nodiscard]] virtual Status copyToHostAsync(void*, void*, const void*, size_t) {
    return Status{Code::Unsupported,
                  std::string(name()) + " cannot copy device memory in stream order here"};
  }
  // Unsupported when work put on the stream now would be captured into a graph rather than run
  // (replaying the graph would not replay the daemon's part); the runtime's error when it cannot
  // tell. The default: a runtime without graphs never captures.
  [[nodiscard]] virtual Status checkNotCapturing(void*) { return okStatus(); }
  // Blocks until the stream's work completed (cuStreamSynchronize); the stream's error if it
  // failed. Used where the protocol cannot run on the stream (operations of a group).
  // The default refuses: a runtime without it cannot take part in groups of stream-ordered ops.
  [[nodiscard]] virtual Status synchronize(void*) {
    return invalidArgument(std::string(name()) + " streams cannot be synchronized here");
  }
};

// The runtimes present in this process: the simulated device always, CUDA and HIP when the
// process has loaded them. Built once, on first use.
const std::vector<DeviceRuntime*>& deviceRuntimes();

// Implemented by each runtime's file; null when the runtime is not present in this process.
DeviceRuntime* simRuntime();
DeviceRuntime* cudaRuntime();
DeviceRuntime* hipRuntime();

}  // namespace hc::client
