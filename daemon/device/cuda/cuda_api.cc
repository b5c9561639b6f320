#include "daemon/device/cuda/cuda_api.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <string>

namespace hc::device {
namespace {

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
#define HC_CUDA_RESOLVE_ENTRY(member, name, symbol, version)                                  \
  {                                                                                           \
    void* slot = driver->resolver_.resolve(name, #symbol, version);                           \
    if (slot == nullptr) {                                                                    \
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

CudaDriver::~CudaDriver() {
  if (!keepLoaded_ && handle_ != nullptr) ::dlclose(handle_);
}

std::string CudaDriver::errorName(CUresult result) const {
  const char* name = nullptr;
  if (getErrorName.fn != nullptr && getErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  name = knownCudaResultName(result);
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
