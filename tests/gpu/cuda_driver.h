// The CUDA driver entry points the probe calls, resolved at run time from a dlopened
// libcuda.so.1 (the probe links neither libcuda nor libcudart, so it runs where no driver is and
// says so), and the CUDA side of one probe process. cuda.h is included for types and signatures.
//
// Its own table of the entry points it needs, filled the way the daemon fills its own
// (daemon/device/cuda/cuda_entry.h, header only: the probe does not link the daemon's backend).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "daemon/device/cuda/cuda_entry.h"
#include "tests/gpu/probe.h"

namespace hc::gpuprobe {

using device::CudaEntryResolver;
using device::DriverEntry;

// member, the name cuGetProcAddress knows, the versioned symbol cuda.h declares, and the CUDA
// version that introduced that signature.
#define HC_PROBE_CUDA_ENTRY_POINTS(X)                                                            \
  X(init, "cuInit", cuInit, 2000)                                                                \
  X(driverGetVersion, "cuDriverGetVersion", cuDriverGetVersion, 2020)                            \
  X(getErrorName, "cuGetErrorName", cuGetErrorName, 6000)                                        \
  X(getErrorString, "cuGetErrorString", cuGetErrorString, 6000)                                  \
  X(deviceGetCount, "cuDeviceGetCount", cuDeviceGetCount, 2000)                                  \
  X(deviceGet, "cuDeviceGet", cuDeviceGet, 2000)                                                 \
  X(deviceGetName, "cuDeviceGetName", cuDeviceGetName, 2000)                                     \
  X(deviceTotalMem, "cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020)                               \
  X(deviceGetPCIBusId, "cuDeviceGetPCIBusId", cuDeviceGetPCIBusId, 4010)                         \
  X(deviceGetAttribute, "cuDeviceGetAttribute", cuDeviceGetAttribute, 2000)                      \
  X(devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000)          \
  X(devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000)   \
  X(ctxSetCurrent, "cuCtxSetCurrent", cuCtxSetCurrent, 4000)                                     \
  X(ctxSynchronize, "cuCtxSynchronize", cuCtxSynchronize, 2000)                                  \
  X(memAlloc, "cuMemAlloc", cuMemAlloc_v2, 3020)                                                 \
  X(memFree, "cuMemFree", cuMemFree_v2, 3020)                                                    \
  X(memsetD32, "cuMemsetD32", cuMemsetD32_v2, 3020)                                              \
  X(memsetD32Async, "cuMemsetD32Async", cuMemsetD32Async, 3020)                                  \
  X(memcpyDtoH, "cuMemcpyDtoH", cuMemcpyDtoH_v2, 3020)                                           \
  X(ipcGetMemHandle, "cuIpcGetMemHandle", cuIpcGetMemHandle, 4010)                               \
  X(ipcOpenMemHandle, "cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2, 11000)                        \
  X(ipcCloseMemHandle, "cuIpcCloseMemHandle", cuIpcCloseMemHandle, 4010)                         \
  X(memGetAllocationGranularity, "cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, \
    10020)                                                                                       \
  X(memCreate, "cuMemCreate", cuMemCreate, 10020)                                                \
  X(memRelease, "cuMemRelease", cuMemRelease, 10020)                                             \
  X(memAddressReserve, "cuMemAddressReserve", cuMemAddressReserve, 10020)                        \
  X(memAddressFree, "cuMemAddressFree", cuMemAddressFree, 10020)                                 \
  X(memMap, "cuMemMap", cuMemMap, 10020)                                                         \
  X(memUnmap, "cuMemUnmap", cuMemUnmap, 10020)                                                   \
  X(memSetAccess, "cuMemSetAccess", cuMemSetAccess, 10020)                                       \
  X(memExportToShareableHandle, "cuMemExportToShareableHandle", cuMemExportToShareableHandle,    \
    10020)                                                                                       \
  X(memImportFromShareableHandle, "cuMemImportFromShareableHandle",                              \
    cuMemImportFromShareableHandle, 10020)                                                       \
  X(memHostAlloc, "cuMemHostAlloc", cuMemHostAlloc, 2020)                                        \
  X(memFreeHost, "cuMemFreeHost", cuMemFreeHost, 2000)                                           \
  X(memHostGetDevicePointer, "cuMemHostGetDevicePointer", cuMemHostGetDevicePointer_v2, 3020)    \
  X(streamCreate, "cuStreamCreate", cuStreamCreate, 2000)                                        \
  X(streamDestroy, "cuStreamDestroy", cuStreamDestroy_v2, 4000)                                  \
  X(streamQuery, "cuStreamQuery", cuStreamQuery, 2000)                                           \
  X(streamWaitValue32, "cuStreamWaitValue32", cuStreamWaitValue32_v2, 12000)

class CudaDriver {
 public:
  // dlopens `library` and resolves every entry point; does not call cuInit. "" when ready, else
  // why not; *noDriver is set when the library itself could not be loaded.
  std::string load(const std::string& library, bool* noDriver);
  // "getproc" when every entry came from cuGetProcAddress_v2, "dlsym" when any did not.
  const char* resolvedBy() const { return resolver_.byProcAddress() ? "getproc" : "dlsym"; }
  // "cuMemCreate: CUDA_ERROR_NOT_SUPPORTED (operation not supported)"
  std::string describe(CUresult result, const char* call) const;

#define HC_PROBE_DECLARE_ENTRY(member, name, symbol, version) \
  DriverEntry<decltype(&symbol)> member{nullptr, name};
  HC_PROBE_CUDA_ENTRY_POINTS(HC_PROBE_DECLARE_ENTRY)
#undef HC_PROBE_DECLARE_ENTRY

 private:
  // Over the dlopened library, never closed: once cuInit ran, the driver's own threads use the
  // library until the process exits.
  CudaEntryResolver resolver_;
};

// The CUDA side of one probe process: the driver loaded and initialised, and, for the primitives,
// the device's primary context current on the calling thread.
class CudaSession {
 public:
  CudaSession() = default;
  // Releases the primary context, unless abandon() was called.
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  // Loads the driver, cuInit, finds the device, and with `withContext` makes its primary context
  // current. Pass (empty text) when ready; Skip when there is no driver or no GPU; Fail otherwise.
  Outcome start(const ProbeOptions& options, bool withContext);
  CudaDriver& driver() { return driver_; }
  CUdevice device() const { return device_; }
  // The device attribute, or -1 when the driver cannot say.
  int attribute(CUdevice_attribute attribute) const;
  // Copies `bytes` at `ptr` to the host and counts the 32-bit words that are not `expected`.
  // "" or the failed call.
  std::string countMismatches(CUdeviceptr ptr, size_t bytes, uint32_t expected, size_t* bad);
  // Leaves the context alone at exit: a stream the GPU never released may hold its teardown.
  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }

 private:
  CudaDriver driver_;
  CUdevice device_ = 0;
  bool retained_ = false;
  bool abandoned_ = false;
};

// Runs a cleanup at scope exit, so that a failure returned from the middle of a primitive still
// undoes its setup in reverse order.
template <typename F>
class Undo {
 public:
  explicit Undo(F undo) : undo_(std::move(undo)) {}
  ~Undo() { undo_(); }
  Undo(const Undo&) = delete;
  Undo& operator=(const Undo&) = delete;

 private:
  F undo_;
};

// Returns a failure from the enclosing function (which returns an Outcome) when a driver call
// fails: HC_PROBE_CU(d, "A: ", memAlloc, &ptr, bytes);
#define HC_PROBE_CU(driver, who, entry, ...)                                       \
  do {                                                                             \
    const CUresult hc_probe_result_ = (driver).entry(__VA_ARGS__);                 \
    if (hc_probe_result_ != CUDA_SUCCESS) {                                        \
      return fail(who + (driver).describe(hc_probe_result_, (driver).entry.name)); \
    }                                                                              \
  } while (0)

}  // namespace hc::gpuprobe
