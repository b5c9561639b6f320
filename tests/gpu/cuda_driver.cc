#include "tests/gpu/cuda_driver.h"

#include <dlfcn.h>

#include <string>
#include <vector>

namespace hc::gpuprobe {

std::string CudaDriver::load(const std::string& library, bool* noDriver) {
  *noDriver = false;
  // RTLD_LOCAL: the driver's symbols serve this table only.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *noDriver = true;
    const char* why = ::dlerror();
    return why != nullptr ? why : "cannot load " + library;
  }
  resolver_ = CudaEntryResolver(handle);
#define HC_PROBE_RESOLVE_ENTRY(member, name, symbol, version)   \
  {                                                             \
    void* slot = resolver_.resolve(name, #symbol, version);     \
    if (slot == nullptr) {                                      \
      return library + " has no " name " (" #symbol             \
                       "): the driver is older than the probe " \
                       "needs";                                 \
    }                                                           \
    member.fn = reinterpret_cast<decltype(member.fn)>(slot);    \
  }
  HC_PROBE_CUDA_ENTRY_POINTS(HC_PROBE_RESOLVE_ENTRY)
#undef HC_PROBE_RESOLVE_ENTRY
  return "";
}

std::string CudaDriver::describe(CUresult result, const char* call) const {
  const char* name = nullptr;
  if (getErrorName.fn == nullptr || getErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (name == nullptr) name = device::knownCudaResultName(result);
  std::string text =
      std::string(call) + ": " + (name != nullptr ? name : "CUresult " + std::to_string(result));
  const char* words = nullptr;
  if (getErrorString.fn != nullptr && getErrorString(result, &words) == CUDA_SUCCESS &&
      words != nullptr) {
    text += std::string(" (") + words + ")";
  }
  return text;
}

CudaSession::~CudaSession() {
  if (retained_ && !abandoned_) {
    (void)driver_.ctxSetCurrent(nullptr);
    (void)driver_.devicePrimaryCtxRelease(device_);
  }
}

Outcome CudaSession::start(const ProbeOptions& options, bool withContext) {
  // Named in the notes, so that a hang in the driver says where it hung.
  const char* who = options.role == "a" ? "A" : options.role == "b" ? "B" : "-";
  note(who, "dlopen " + options.driver);
  bool noDriver = false;
  const std::string why = driver_.load(options.driver, &noDriver);
  if (noDriver) return skip("(no CUDA driver: " + why + ")");
  if (!why.empty()) return fail(why);
  note(who, "cuInit");
  const CUresult initialised = driver_.init(0);
  // A machine without a GPU: the toolkit's stub in place of the driver, or a driver and no device.
  if (initialised == CUDA_ERROR_STUB_LIBRARY) {
    return skip("(no CUDA driver: " + options.driver + " is the toolkit's stub; " +
                driver_.describe(initialised, driver_.init.name) + ")");
  }
  if (initialised == CUDA_ERROR_NO_DEVICE) {
    return skip("(no CUDA device: " + driver_.describe(initialised, driver_.init.name) + ")");
  }
  if (initialised != CUDA_SUCCESS) return fail(driver_.describe(initialised, driver_.init.name));
  int count = 0;
  HC_PROBE_CU(driver_, "", deviceGetCount, &count);
  if (options.device < 0 || options.device >= count) {
    return fail("--device " + std::to_string(options.device) + " is not among the " +
                std::to_string(count) + " CUDA devices");
  }
  HC_PROBE_CU(driver_, "", deviceGet, &device_, options.device);
  if (!withContext) return pass("");
  note(who, "cuDevicePrimaryCtxRetain");
  CUcontext context = nullptr;
  HC_PROBE_CU(driver_, "", devicePrimaryCtxRetain, &context, device_);
  retained_ = true;
  HC_PROBE_CU(driver_, "", ctxSetCurrent, context);
  return pass("");
}

int CudaSession::attribute(CUdevice_attribute attribute) const {
  int value = -1;
  if (driver_.deviceGetAttribute(&value, attribute, device_) != CUDA_SUCCESS) return -1;
  return value;
}

std::string CudaSession::countMismatches(CUdeviceptr ptr, size_t bytes, uint32_t expected,
                                         size_t* bad) {
  std::vector<uint32_t> host(bytes / sizeof(uint32_t));
  // Synchronous, to pageable memory: it returns once the copy is done, after the work before it
  // on the legacy default stream.
  const CUresult copied = driver_.memcpyDtoH(host.data(), ptr, bytes);
  if (copied != CUDA_SUCCESS) return driver_.describe(copied, driver_.memcpyDtoH.name);
  *bad = 0;
  for (uint32_t word : host) *bad += word != expected ? 1 : 0;
  return "";
}

}  // namespace hc::gpuprobe
