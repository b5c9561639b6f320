#include "daemon/device/cuda/cuda_api.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <string>

namespace hc::device {
namespace {

// Names of the results the daemon meets most, for when the driver cannot name them itself (the
// toolkit's stub answers every call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY).
const char* knownErrorName(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
      return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
      return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    default:
      return nullptr;
  }
}

Code codeFor(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return Code::NoResource;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_ALREADY_MAPPED:
      return Code::InvalidArgument;
    case CUDA_ERROR_NOT_FOUND:
      return Code::NotFound;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_OPERATING_SYSTEM:
      return Code::Unavailable;
    default:
      return Code::DeviceError;
  }
}

// dlerror()'s words, or a fallback when it has none.
std::string loaderError() {
  const char* why = ::dlerror();
  return why != nullptr ? why : "unknown dynamic loader error";
}

}  // namespace

Result<std::shared_ptr<CudaDriver>> CudaDriver::load(const std::string& library) {
  // RTLD_LOCAL: the driver's symbols serve this object only, and cannot satisfy (or clash with)
  // anyone else's references.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return unavailable("CUDA unavailable: cannot load " + library +
                       " (is the NVIDIA driver installed?): " + loaderError());
  }
  std::shared_ptr<CudaDriver> driver(new CudaDriver(library, handle));
  driver->getProcAddress_ =
      reinterpret_cast<decltype(&cuGetProcAddress_v2)>(::dlsym(handle, "cuGetProcAddress_v2"));
  driver->resolvedByProcAddress_ = driver->getProcAddress_ != nullptr;
#define HC_CUDA_RESOLVE_ENTRY(member, name, symbol, version)                                  \
  {                                                                                           \
    void* slot = nullptr;                                                                     \
    if (!driver->resolve(&slot, name, #symbol, version)) {                                    \
      return unavailable("CUDA unavailable: " + library +                                     \
                         " has no " name " (" #symbol                                         \
                         "): the NVIDIA driver is too old for this daemon, which needs CUDA " \
                         "11.0 or newer");                                                    \
    }                                                                                         \
    driver->member.fn = reinterpret_cast<decltype(driver->member.fn)>(slot);                  \
  }
  HC_CUDA_DRIVER_ENTRY_POINTS(HC_CUDA_RESOLVE_ENTRY)
#undef HC_CUDA_RESOLVE_ENTRY
  return driver;
}

bool CudaDriver::resolve(void** slot, const char* name, const char* symbol, int version) {
  if (getProcAddress_ != nullptr) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (getProcAddress_(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
      *slot = fn;
      return true;
    }
  }
  // Drivers before CUDA 12 have no cuGetProcAddress_v2, and the toolkit's stub answers it with
  // CUDA_ERROR_STUB_LIBRARY: the versioned symbol has the signature cuda.h declares.
  resolvedByProcAddress_ = false;
  *slot = ::dlsym(handle_, symbol);
  return *slot != nullptr;
}

CudaDriver::~CudaDriver() {
  if (!keepLoaded_ && handle_ != nullptr) ::dlclose(handle_);
}

std::string CudaDriver::errorName(CUresult result) const {
  const char* name = nullptr;
  if (getErrorName.fn != nullptr && getErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  name = knownErrorName(result);
  return name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(result));
}

std::string CudaDriver::describe(CUresult result, const char* call) const {
  std::string text = std::string(call) + ": " + errorName(result);
  const char* words = nullptr;
  if (getErrorString.fn != nullptr && getErrorString(result, &words) == CUDA_SUCCESS &&
      words != nullptr) {
    text += std::string(" (") + words + ")";
  }
  return text;
}

Status CudaDriver::toStatus(CUresult result, const char* call) const {
  Status status(codeFor(result), describe(result, call));
  if (status.code() == Code::DeviceError) {
    spdlog::error("CUDA: {}", status.message());
  } else {
    spdlog::debug("CUDA: {}", status.message());
  }
  return status;
}

ScopedContext::ScopedContext(const CudaDriver& driver, CUcontext context) : driver_(driver) {
  const CUresult result = driver_.ctxPushCurrent(context);
  if (result != CUDA_SUCCESS) status_ = driver_.toStatus(result, driver_.ctxPushCurrent.name);
}

ScopedContext::~ScopedContext() {
  if (!status_.isOk()) return;
  CUcontext popped = nullptr;
  const CUresult result = driver_.ctxPopCurrent(&popped);
  if (result != CUDA_SUCCESS) {
    spdlog::warn("CUDA: {}", driver_.describe(result, driver_.ctxPopCurrent.name));
  }
}

}  // namespace hc::device
