// A HipApi whose entry points are fakes over host memory, so HipDevice's own logic (properties,
// import bounds, stream and event bookkeeping, kernel loading and its fallback, how reductions
// are split into launches) runs in unit tests on machines without an AMD GPU. It emulates the
// runtime's contract, not its behaviour on hardware: nothing here says the backend works on a GPU.
//
// Kernel launches run at once on the calling thread: the fake decodes the ReduceArgs the device
// passed and applies the shared kernels' element math (reduce_math.h, compiled for the host).
// "Device" pointers are host pointers; copies are memcpy. A legacy IPC handle in the form of
// fake_hip_ipc.h that names a memfd ({pid, fd}, as the client-side fake hands out for hipMalloc
// memory) is mapped through /proc/<pid>/fd/<fd>; any other handle opens as `ipcPointer`. A VMM fd
// is any file (a memfd in the tests): importing it duplicates the fd, hipMemMap maps it shared
// into the range hipMemAddressReserve reserved, and hipMemSetAccess makes it readable and
// writable.
//
// The same fakes, behind the runtime's exported names, are the HIP runtime a daemon loads in the
// integration tests (fake_libamdhip64.cc). Not thread-safe: that library serializes its calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/device/hip/hip_api.h"
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device::testing {

// What the fakes do and what they saw. One instance is live at a time (the fakes are plain
// functions, so they reach it through a global); FakeHipRuntime installs and removes it.
struct FakeHipState {
  // Answers.
  hipError_t moduleLoadResult = hipSuccess;
  hipError_t eventQueryResult = hipSuccess;
  hipError_t streamSyncResult = hipSuccess;
  size_t freeBytes = size_t{48} << 30;
  size_t moduleBytes = size_t{2} << 20;  // what loading the module takes from freeBytes
  int multiprocessors = 104;
  // hipIpcOpenMemHandle returns `ipcPointer` for a handle that names no memfd;
  // hipMemGetAddressRange reports [rangeBase, rangeBase + rangeBytes) for it.
  void* ipcPointer = nullptr;
  void* rangeBase = nullptr;
  size_t rangeBytes = 0;

  // Observations.
  int vmmHandles = 0;              // imported and not yet released
  int reservations = 0;            // address ranges reserved and not yet freed
  int mappings = 0;                // hipMemMap not yet undone by hipMemUnmap
  std::vector<int> accessDevices;  // hipMemSetAccess: the device each call granted
  std::vector<unsigned> ipcOpenFlags;
  std::vector<void*> ipcClosed;
  std::map<void*, size_t> ipcMapped;  // memfd handles opened and not yet closed: address -> bytes
  std::vector<std::string> functionsLookedUp;
  std::vector<kernels::ReduceArgs> launches;
  std::vector<unsigned> launchBlocks;
  std::vector<unsigned> launchThreads;
  std::vector<unsigned> streamFlags;
  std::vector<unsigned> eventFlags;
  int eventsCreated = 0;
  int copies = 0;
  int modulesUnloaded = 0;
};

class FakeHipRuntime {
 public:
  explicit FakeHipRuntime(int abiMajor = 5);
  ~FakeHipRuntime();
  FakeHipRuntime(const FakeHipRuntime&) = delete;
  FakeHipRuntime& operator=(const FakeHipRuntime&) = delete;

  FakeHipState& state() { return *state_; }
  std::shared_ptr<const HipApi> api() const { return api_; }
  // A runtime before HIP 5.1: no VMM calls.
  void removeVmm();

 private:
  std::unique_ptr<FakeHipState> state_;
  std::shared_ptr<HipApi> api_;
};

}  // namespace hc::device::testing
