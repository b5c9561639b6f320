// How a CUDA driver table is filled at run time, shared by the daemon's CudaDriver (cuda_api.h)
// and the GPU probe (tests/gpu/cuda_driver.h), which need different entry points of the same
// dlopened libcuda.so.1: each entry point comes from cuGetProcAddress_v2 at the CUDA version that
// introduced the signature cuda.h declares (drivers since 12.0), else from dlsym of that versioned
// symbol. Header only, so a program outside the daemon may use it without linking the backend.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

namespace hc::device {

// One driver entry point: the function and the name it is known by in messages. Called like the
// function itself.
template <typename Fn>
struct DriverEntry;
template <typename R, typename... Args>
struct DriverEntry<R (*)(Args...)> {
  R (*fn)(Args...) = nullptr;
  const char* name = "";
  R operator()(Args... args) const { return fn(args...); }
};

// Finds the entry points of one dlopened driver library (borrowed: it outlives this).
class CudaEntryResolver {
 public:
  CudaEntryResolver() = default;
  explicit CudaEntryResolver(void* handle)
      : handle_(handle),
        getProcAddress_(reinterpret_cast<decltype(&cuGetProcAddress_v2)>(
            ::dlsym(handle, "cuGetProcAddress_v2"))),
        byProcAddress_(getProcAddress_ != nullptr) {}

  // The entry point `name` (no version suffix) at `version`, else the versioned `symbol`; null
  // when the driver has neither.
  void* resolve(const char* name, const char* symbol, int version) {
    if (getProcAddress_ != nullptr) {
      void* fn = nullptr;
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      if (getProcAddress_(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
              CUDA_SUCCESS &&
          found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
        return fn;
      }
    }
    // Drivers before CUDA 12 have no cuGetProcAddress_v2, and the toolkit's stub answers it with
    // CUDA_ERROR_STUB_LIBRARY: the versioned symbol has the signature cuda.h declares.
    byProcAddress_ = false;
    return ::dlsym(handle_, symbol);
  }

  // true while every entry point came from cuGetProcAddress_v2.
  bool byProcAddress() const { return byProcAddress_; }

 private:
  void* handle_ = nullptr;
  decltype(&cuGetProcAddress_v2) getProcAddress_ = nullptr;
  bool byProcAddress_ = false;
};

// Names of the results met most, for when the driver cannot name them itself (the toolkit's stub
// answers every call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY); null for others.
inline const char* knownCudaResultName(CUresult result) {
  switch (result) {
#define HC_CUDA_RESULT_NAME(r) \
  case r:                      \
    return #r;
    HC_CUDA_RESULT_NAME(CUDA_SUCCESS)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_VALUE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NOT_INITIALIZED)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_DEINITIALIZED)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_STUB_LIBRARY)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NO_DEVICE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_DEVICE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_IMAGE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_CONTEXT)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_PTX)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_OPERATING_SYSTEM)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_INVALID_HANDLE)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NOT_FOUND)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NOT_READY)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_LAUNCH_FAILED)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NOT_PERMITTED)
    HC_CUDA_RESULT_NAME(CUDA_ERROR_NOT_SUPPORTED)
#undef HC_CUDA_RESULT_NAME
    default:
      return nullptr;
  }
}

}  // namespace hc::device
