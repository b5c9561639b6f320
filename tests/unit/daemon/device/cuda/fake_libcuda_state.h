// The state behind the fake driver (fake_libcuda.cc: what the daemon's backend calls;
// fake_libcuda_client.cc: what the client's CUDA seam calls), shared by both halves of the one
// library. Internal to the fake.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/device/kernels/reduce_args.h"
#include "tests/unit/daemon/device/cuda/fake_cuda.h"
#include "tests/unit/daemon/device/fake_streams.h"
#include "tests/unit/daemon/device/memfd_allocation.h"

struct CUctx_st {
  int ordinal = 0;
  int retains = 0;
};
// A stream made by cuStreamCreate: its queue (fake_streams.h) runs its work in order.
struct CUstream_st {
  std::unique_ptr<hc::device::testing::FakeStream> queue;
};
struct CUevent_st {
  int unused = 0;
};
struct CUmod_st {
  int unused = 0;
};
struct CUfunc_st {
  uint32_t dtype = 0;
};

namespace hc::device::fake_cuda::driver {

namespace k = hc::device::kernels;
namespace fake = hc::device::fake_cuda;

struct Gpu {
  int computeMode = CU_COMPUTEMODE_DEFAULT;
  CUctx_st context;
};

// A CUmemGenericAllocationHandle: imported (the daemon's side) or retained (the client's).
struct VmmAllocation {
  int fd = -1;  // our own duplicate
  size_t bytes = 0;
  int requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
};

// A "device allocation" of the client-side tests (hcFakeCudaAddDeviceAllocation), or a VMM
// allocation mapped by its owner (hcFakeCudaCreateVmmAllocation): a memfd mapped shared, whose
// mapping is the "device pointer".
struct DeviceAllocation {
  size_t bytes = 0;
  int device = 0;
  unsigned long long bufferId = 0;
  bool managed = false;
  std::shared_ptr<hc::device::testing::MemfdAllocation> vmm;  // null: cudaMalloc-style memory
  int requestedHandleTypes = 0;
  // cuMemAlloc's memory: its memfd, which a process given its IPC handle opens through /proc.
  std::shared_ptr<hc::device::testing::MemfdAllocation> backing;
};

struct State {
  std::mutex mutex;
  bool initialized = false;
  bool moduleLoadFails = false;
  std::vector<Gpu> gpus;
  std::map<CUdeviceptr, size_t> ipcOpen;  // address -> bytes
  std::set<CUdeviceptr> ipcMapped;        // of ipcOpen: another process's memory, mapped here
  std::map<CUmemGenericAllocationHandle, VmmAllocation> vmm;
  CUmemGenericAllocationHandle nextVmm = 1;
  std::map<CUdeviceptr, size_t> reserved;  // address -> bytes
  std::set<void*> pinned;
  // cuMemAlloc's: host memory (the fake's kernels run on the host), a memfd each, so that the
  // client half can export it by legacy IPC handle to another process (a daemon).
  std::map<void*, std::shared_ptr<hc::device::testing::MemfdAllocation>> deviceMemory;
  unsigned long long nextBufferId = 1ull << 40;  // of cuMemAlloc's allocations
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::map<CUmodule, int> modules;  // -> ordinal of the GPU it was loaded on
  // The client side: allocations the test made up, and host memory registered with the driver.
  std::map<CUdeviceptr, DeviceAllocation> allocations;  // by base address
  std::map<uintptr_t, size_t> registered;               // host address -> bytes
  std::map<int, std::vector<int>> pciOverride;          // device -> {domain, bus, slot}
  CUfunc_st functions[k::kNumKernelDtypes];
  int launches = 0;
  int streamsMade = 0;  // names the streams in the log: stream1, stream2, ...
  // The legacy (NULL) stream of each device's context, by ordinal: made on first use and kept
  // for the process's life, as the driver's is (never destroyed, so its worker is never joined).
  std::map<int, hc::device::testing::FakeStream*> legacyStreams;
};

inline State& state() {
  static State s;
  return s;
}

// Contexts pushed on each thread (cuCtxPushCurrent), innermost last.
inline thread_local std::vector<CUcontext> contextStack;

inline bool hasContext() { return !contextStack.empty(); }

inline void configureFromEnvironment(State& s) {
  s.gpus.clear();
  const char* devices = std::getenv(fake::kDevicesVariable);
  std::stringstream list(devices != nullptr ? devices : "default");
  std::string mode;
  while (std::getline(list, mode, ',')) {
    Gpu gpu;
    gpu.computeMode = mode == "exclusive"    ? CU_COMPUTEMODE_EXCLUSIVE_PROCESS
                      : mode == "prohibited" ? CU_COMPUTEMODE_PROHIBITED
                                             : CU_COMPUTEMODE_DEFAULT;
    gpu.context.ordinal = static_cast<int>(s.gpus.size());
    s.gpus.push_back(gpu);
  }
  const char* failModule = std::getenv(fake::kModuleLoadFailsVariable);
  s.moduleLoadFails = failModule != nullptr && std::string(failModule) == "1";
}

// The versioned symbols this library implements, with the CUDA version that introduced each.
struct Versioned {
  const char* name;
  int version;
  const char* symbol;
};
inline constexpr Versioned kVersioned[] = {
    {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"},
    {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2"},
    {"cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2"},
    {"cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2"},
    {"cuMemGetInfo", 3020, "cuMemGetInfo_v2"},
    {"cuIpcOpenMemHandle", 11000, "cuIpcOpenMemHandle_v2"},
    {"cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2"},
    {"cuMemAlloc", 3020, "cuMemAlloc_v2"},
    {"cuMemFree", 3020, "cuMemFree_v2"},
    {"cuStreamDestroy", 4000, "cuStreamDestroy_v2"},
    {"cuEventDestroy", 4000, "cuEventDestroy_v2"},
    {"cuMemHostRegister", 6050, "cuMemHostRegister_v2"},
    {"cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2"},
    {"cuStreamWaitValue32", 12000, "cuStreamWaitValue32_v2"},
};

inline void* selfHandle() {
  Dl_info info{};
  static int anchor;
  if (dladdr(&anchor, &info) == 0) return nullptr;
  return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
}

inline bool knownStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().streams.count(stream) == 1;
}

// The log every stream of this driver writes (fake_cuda.h: kStreamLogVariable names its file).
inline hc::device::testing::FakeStreamLog& streamLog() {
  // Never destroyed: legacy streams, which live as long as the process, write to it.
  static auto* log = new hc::device::testing::FakeStreamLog(fake::kStreamLogVariable);
  return *log;
}

// The queue of `stream`: one made by cuStreamCreate, or, for 0 and CU_STREAM_LEGACY, the legacy
// stream of the calling thread's current context, which the driver requires for them. Null with
// *error set otherwise (CU_STREAM_PER_THREAD included: not modelled).
inline hc::device::testing::FakeStream* queueOf(CUstream stream, CUresult* error) {
  const bool legacy = stream == nullptr || stream == CU_STREAM_LEGACY;
  if (legacy && !hasContext()) {
    *error = CUDA_ERROR_INVALID_CONTEXT;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!legacy) {
    if (state().streams.count(stream) == 0) {
      *error = CUDA_ERROR_INVALID_HANDLE;
      return nullptr;
    }
    return stream->queue.get();
  }
  const int ordinal = contextStack.back()->ordinal;
  hc::device::testing::FakeStream*& queue = state().legacyStreams[ordinal];
  if (queue == nullptr) {
    queue = new hc::device::testing::FakeStream("legacy" + std::to_string(ordinal), streamLog());
  }
  return queue;
}

}  // namespace hc::device::fake_cuda::driver
