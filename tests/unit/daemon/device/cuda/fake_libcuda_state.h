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
#include "tests/unit/daemon/device/memfd_allocation.h"

struct CUctx_st {
  int ordinal = 0;
  int retains = 0;
};
struct CUstream_st {
  int unused = 0;
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
};

struct State {
  std::mutex mutex;
  bool initialized = false;
  bool moduleLoadFails = false;
  std::vector<Gpu> gpus;
  std::map<CUdeviceptr, size_t> ipcOpen;  // address -> bytes
  std::map<CUmemGenericAllocationHandle, VmmAllocation> vmm;
  CUmemGenericAllocationHandle nextVmm = 1;
  std::map<CUdeviceptr, size_t> reserved;  // address -> bytes
  std::set<void*> pinned;
  std::set<void*> deviceMemory;  // cuMemAlloc's (host memory: the fake's kernels run on the host)
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::map<CUmodule, int> modules;  // -> ordinal of the GPU it was loaded on
  // The client side: allocations the test made up, and host memory registered with the driver.
  std::map<CUdeviceptr, DeviceAllocation> allocations;  // by base address
  std::map<uintptr_t, size_t> registered;               // host address -> bytes
  std::map<int, std::vector<int>> pciOverride;          // device -> {domain, bus, slot}
  CUfunc_st functions[k::kNumKernelDtypes];
  int launches = 0;
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

}  // namespace hc::device::fake_cuda::driver
