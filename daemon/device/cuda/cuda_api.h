// CudaDriver: every CUDA driver entry point the daemon calls, resolved at run time from a dlopened
// libcuda.so.1, and the conversion of CUresult into hc::Status. Nothing in the project links
// libcuda or libcudart; cuda.h is included for its types and signatures only.
//
// Internal to daemon/device/cuda (it includes cuda.h; the headers the daemon includes do not).
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/device/cuda/cuda_entry.h"

namespace hc::device {

// Each entry point: member, the name cuGetProcAddress knows (no version suffix), the versioned
// symbol whose signature cuda.h declares (dlsym falls back to it), and the CUDA version that
// introduced that signature, which cuGetProcAddress needs to return that version and no newer one.
#define HC_CUDA_DRIVER_ENTRY_POINTS(X)                                                           \
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
  X(ctxPushCurrent, "cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000)                               \
  X(ctxPopCurrent, "cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000)                                  \
  X(memGetInfo, "cuMemGetInfo", cuMemGetInfo_v2, 3020)                                           \
  X(ipcOpenMemHandle, "cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2, 11000)                        \
  X(ipcCloseMemHandle, "cuIpcCloseMemHandle", cuIpcCloseMemHandle, 4010)                         \
  X(memGetAddressRange, "cuMemGetAddressRange", cuMemGetAddressRange_v2, 3020)                   \
  X(memImportFromShareableHandle, "cuMemImportFromShareableHandle",                              \
    cuMemImportFromShareableHandle, 10020)                                                       \
  X(memGetAllocationGranularity, "cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, \
    10020)                                                                                       \
  X(memAddressReserve, "cuMemAddressReserve", cuMemAddressReserve, 10020)                        \
  X(memAddressFree, "cuMemAddressFree", cuMemAddressFree, 10020)                                 \
  X(memMap, "cuMemMap", cuMemMap, 10020)                                                         \
  X(memUnmap, "cuMemUnmap", cuMemUnmap, 10020)                                                   \
  X(memSetAccess, "cuMemSetAccess", cuMemSetAccess, 10020)                                       \
  X(memRelease, "cuMemRelease", cuMemRelease, 10020)                                             \
  X(memHostAlloc, "cuMemHostAlloc", cuMemHostAlloc, 2020)                                        \
  X(memFreeHost, "cuMemFreeHost", cuMemFreeHost, 2000)                                           \
  X(memAlloc, "cuMemAlloc", cuMemAlloc_v2, 3020)                                                 \
  X(memFree, "cuMemFree", cuMemFree_v2, 3020)                                                    \
  X(streamCreate, "cuStreamCreate", cuStreamCreate, 2000)                                        \
  X(streamDestroy, "cuStreamDestroy", cuStreamDestroy_v2, 4000)                                  \
  X(streamSynchronize, "cuStreamSynchronize", cuStreamSynchronize, 2000)                         \
  X(memcpyAsync, "cuMemcpyAsync", cuMemcpyAsync, 4000)                                           \
  X(eventCreate, "cuEventCreate", cuEventCreate, 2000)                                           \
  X(eventRecord, "cuEventRecord", cuEventRecord, 2000)                                           \
  X(eventQuery, "cuEventQuery", cuEventQuery, 2000)                                              \
  X(eventDestroy, "cuEventDestroy", cuEventDestroy_v2, 4000)                                     \
  X(moduleLoadData, "cuModuleLoadData", cuModuleLoadData, 2000)                                  \
  X(moduleUnload, "cuModuleUnload", cuModuleUnload, 2000)                                        \
  X(moduleGetFunction, "cuModuleGetFunction", cuModuleGetFunction, 2000)                         \
  X(launchKernel, "cuLaunchKernel", cuLaunchKernel, 4000)

// Threads: immutable once loaded; every method may be called from any thread.
// Ownership: shared by the probe and every CudaDevice (std::shared_ptr), so the library stays
// loaded while any device lives.
class CudaDriver {
 public:
  // dlopens `library` (a name for the loader's search, or a path) and resolves every entry point:
  // with cuGetProcAddress_v2 where the driver has it (CUDA 12+), else by dlsym of the versioned
  // names. Does not call cuInit. Unavailable, with the loader's or the missing symbol's words,
  // when the library cannot be used.
  [[nodiscard]] static Result<std::shared_ptr<CudaDriver>> load(const std::string& library);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  // Keeps the library loaded past this object: once cuInit succeeded the driver runs threads of
  // its own, and unloading it under them would crash the process at exit.
  void keepLoaded() { keepLoaded_ = true; }

  const std::string& library() const { return library_; }
  // true when every entry point came from cuGetProcAddress_v2, false when any came from dlsym.
  bool resolvedByProcAddress() const { return resolver_.byProcAddress(); }

  // "CUDA_ERROR_INVALID_VALUE", from the driver when it can say, else from a built-in table.
  std::string errorName(CUresult result) const;
  // "cuIpcOpenMemHandle: CUDA_ERROR_INVALID_VALUE (invalid argument)"
  std::string describe(CUresult result, const char* call) const;
  // The Status for a failed call: NoResource for out-of-memory, InvalidArgument for bad values
  // and handles, Unavailable when there is no usable driver or device, DeviceError otherwise.
  // Logs it once here, where the foreign error enters (device faults as errors, the rest at
  // debug level: callers decide whether those matter).
  Status toStatus(CUresult result, const char* call) const;

#define HC_CUDA_DECLARE_ENTRY(member, name, symbol, version) \
  DriverEntry<decltype(&symbol)> member{nullptr, name};
  HC_CUDA_DRIVER_ENTRY_POINTS(HC_CUDA_DECLARE_ENTRY)
#undef HC_CUDA_DECLARE_ENTRY

 private:
  CudaDriver(std::string library, void* handle)
      : library_(std::move(library)), handle_(handle), resolver_(handle) {}

  std::string library_;
  void* handle_;  // from dlopen
  bool keepLoaded_ = false;
  CudaEntryResolver resolver_;
};

// Returns the call's Status from the enclosing function when a driver call fails:
//   HC_CUDA_TRY(*driver_, memGetInfo, &free, &total);
#define HC_CUDA_TRY(driver, entry, ...)                             \
  do {                                                              \
    const CUresult hc_cu_result_ = (driver).entry(__VA_ARGS__);     \
    if (hc_cu_result_ != CUDA_SUCCESS) {                            \
      return (driver).toStatus(hc_cu_result_, (driver).entry.name); \
    }                                                               \
  } while (0)

// Makes a context current on the calling thread for the scope, and restores the previous one.
// Every CudaDevice method that calls the driver opens one: the daemon's threads serve several
// GPUs, and a context left current by one call must not leak into the next.
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& driver, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  // Not Ok when the context could not be made current; the caller returns it.
  const Status& status() const { return status_; }

 private:
  const CudaDriver& driver_;
  Status status_;
};

}  // namespace hc::device
