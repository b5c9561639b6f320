#include "daemon/device/hip/hip_api.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cctype>

namespace hc::device {
namespace {

// RTLD_LOCAL: the runtime's symbols stay out of the global namespace, so they never satisfy
// another library's undefined references by accident. RTLD_NODELETE: a dlclose() (a library
// rejected for missing symbols, or the symbol check) never unmaps a runtime whose constructors
// already ran; HIP does not survive being unloaded.
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;

// HIP_VERSION = major * 10'000'000 + minor * 100'000 + patch.
constexpr int kHipVersionMajorDivisor = 10'000'000;

// Calls visit(name, member) for every entry point of HipApi, in declaration order: the single
// list that loading, hipApiSymbolNames() and missingHipSymbols() share, so they cannot disagree.
template <typename Visit>
void forEachEntryPoint(HipApi& api, Visit&& visit) {
  visit("hipInit", api.hipInit);
  visit("hipGetErrorName", api.hipGetErrorName);
  visit("hipGetErrorString", api.hipGetErrorString);
  visit("hipRuntimeGetVersion", api.hipRuntimeGetVersion);
  visit("hipGetDeviceCount", api.hipGetDeviceCount);
  visit("hipSetDevice", api.hipSetDevice);
  visit("hipDeviceGet", api.hipDeviceGet);
  visit("hipDeviceGetAttribute", api.hipDeviceGetAttribute);
  visit("hipDeviceGetName", api.hipDeviceGetName);
  visit("hipDeviceTotalMem", api.hipDeviceTotalMem);
  visit("hipDeviceGetPCIBusId", api.hipDeviceGetPCIBusId);
  visit("hipMemGetInfo", api.hipMemGetInfo);
  visit("hipIpcOpenMemHandle", api.hipIpcOpenMemHandle);
  visit("hipIpcCloseMemHandle", api.hipIpcCloseMemHandle);
  visit("hipMemGetAddressRange", api.hipMemGetAddressRange);
  visit("hipHostMalloc", api.hipHostMalloc);
  visit("hipHostFree", api.hipHostFree);
  visit("hipMalloc", api.hipMalloc);
  visit("hipFree", api.hipFree);
  visit("hipStreamCreateWithFlags", api.hipStreamCreateWithFlags);
  visit("hipStreamDestroy", api.hipStreamDestroy);
  visit("hipStreamSynchronize", api.hipStreamSynchronize);
  visit("hipMemcpyAsync", api.hipMemcpyAsync);
  visit("hipEventCreateWithFlags", api.hipEventCreateWithFlags);
  visit("hipEventRecord", api.hipEventRecord);
  visit("hipEventQuery", api.hipEventQuery);
  visit("hipEventDestroy", api.hipEventDestroy);
  visit("hipModuleLoadData", api.hipModuleLoadData);
  visit("hipModuleUnload", api.hipModuleUnload);
  visit("hipModuleGetFunction", api.hipModuleGetFunction);
  visit("hipModuleLaunchKernel", api.hipModuleLaunchKernel);
}

// The optional entry points: VMM imports (HipApi::hasVmm()). `Api` is HipApi, const or not.
template <typename Api, typename Visit>
void forEachVmmEntryPoint(Api& api, Visit&& visit) {
  visit("hipMemImportFromShareableHandle", api.hipMemImportFromShareableHandle);
  visit("hipMemAddressReserve", api.hipMemAddressReserve);
  visit("hipMemAddressFree", api.hipMemAddressFree);
  visit("hipMemMap", api.hipMemMap);
  visit("hipMemUnmap", api.hipMemUnmap);
  visit("hipMemSetAccess", api.hipMemSetAccess);
  visit("hipMemRelease", api.hipMemRelease);
}

// Resolves the entry points `forEach` visits from `library`; returns the names it could not find.
template <typename ForEach>
std::vector<std::string> resolveEntryPoints(void* library, HipApi& api, ForEach&& forEach) {
  std::vector<std::string> missing;
  forEach(api, [&](const char* name, auto& slot) {
    void* symbol = ::dlsym(library, name);
    if (symbol == nullptr) {
      missing.emplace_back(name);
      return;
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
  });
  return missing;
}

std::vector<std::string> resolveRequired(void* library, HipApi& api) {
  return resolveEntryPoints(library, api, [](HipApi& a, auto&& v) { forEachEntryPoint(a, v); });
}
std::vector<std::string> resolveVmm(void* library, HipApi& api) {
  return resolveEntryPoints(library, api, [](HipApi& a, auto&& v) { forEachVmmEntryPoint(a, v); });
}

// The N of a name ending in ".so.N", or 0.
int sonameMajor(const std::string& name) {
  size_t dot = name.rfind(".so.");
  if (dot == std::string::npos) return 0;
  int major = 0;
  for (size_t i = dot + 4; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]));
       ++i) {
    major = major * 10 + (name[i] - '0');
  }
  return major;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

bool HipApi::hasVmm() const {
  bool all = true;
  forEachVmmEntryPoint(*this, [&](const char*, auto& slot) { all = all && slot != nullptr; });
  return all;
}

unsigned int HipApi::ipcOpenFlags() const { return abiMajor >= 6 ? 1u : 0u; }

std::string HipApi::errorName(hipError_t error) const {
  const char* name = hipGetErrorName != nullptr ? hipGetErrorName(error) : nullptr;
  if (name != nullptr) return name;
  return "hipError " + std::to_string(static_cast<int>(error));
}

std::string HipApi::describe(hipError_t error, std::string_view call) const {
  std::string name = errorName(error);
  std::string out = std::string(call) + ": " + name;
  const char* text = hipGetErrorString != nullptr ? hipGetErrorString(error) : nullptr;
  // The 5.2 runtime returns the name again as the description: print it once.
  if (text != nullptr && name != text) out += std::string(" (") + text + ")";
  return out + " [" + std::to_string(static_cast<int>(error)) + "]";
}

Status HipApi::toStatus(hipError_t error, std::string_view call) const {
  Code code = Code::DeviceError;
  switch (error) {
    case hipErrorOutOfMemory:
      code = Code::NoResource;
      break;
    case hipErrorInvalidValue:
    case hipErrorInvalidDevicePointer:
    case hipErrorInvalidHandle:
    case hipErrorInvalidMemcpyDirection:
      code = Code::InvalidArgument;
      break;
    case hipErrorNoDevice:
    case hipErrorInvalidDevice:
    case hipErrorNotInitialized:
    case hipErrorInsufficientDriver:
      code = Code::Unavailable;
      break;
    default:
      break;
  }
  Status status(code, describe(error, call));
  if (code == Code::DeviceError) {
    spdlog::error("HIP: {}", status.message());
  } else {
    spdlog::debug("HIP: {}", status.message());
  }
  return status;
}

Result<std::shared_ptr<const HipApi>> loadHipApi(std::span<const std::string> names) {
  if (names.empty()) return unavailable("HIP unavailable: no HIP runtime library names to try");
  std::string reasons;
  for (const std::string& name : names) {
    ::dlerror();
    void* library = ::dlopen(name.c_str(), kOpenFlags);
    if (library == nullptr) {
      const char* error = ::dlerror();
      reasons += (reasons.empty() ? "" : "; ") + std::string(error != nullptr ? error : name);
      continue;
    }
    auto api = std::make_shared<HipApi>();
    std::vector<std::string> missing = resolveRequired(library, *api);
    if (!missing.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + name + " lacks " + joinNames(missing);
      ::dlclose(library);
      continue;
    }
    std::vector<std::string> noVmm = resolveVmm(library, *api);
    if (!noVmm.empty()) {
      spdlog::info("HIP: {} lacks {}: VMM allocations (fd handles) cannot be imported", name,
                   joinNames(noVmm));
    }
    api->libraryName = name;
    int version = 0;
    if (api->hipRuntimeGetVersion(&version) == hipSuccess && version > 0) {
      api->runtimeVersion = version;
      api->abiMajor = version / kHipVersionMajorDivisor;
    } else {
      api->abiMajor = sonameMajor(name);
    }
    if (api->abiMajor == 0) api->abiMajor = 6;  // an unversioned name: assume the newer ABI
    return std::shared_ptr<const HipApi>(std::move(api));
  }
  return unavailable("HIP unavailable: no usable libamdhip64 (" + reasons + ")");
}

std::vector<std::string> hipApiSymbolNames() {
  std::vector<std::string> names;
  HipApi api;
  forEachEntryPoint(api, [&](const char* name, auto&) { names.emplace_back(name); });
  forEachVmmEntryPoint(api, [&](const char* name, auto&) { names.emplace_back(name); });
  return names;
}

Result<std::vector<std::string>> missingHipSymbols(const std::string& path) {
  ::dlerror();
  void* library = ::dlopen(path.c_str(), kOpenFlags);
  if (library == nullptr) {
    const char* error = ::dlerror();
    return unavailable("cannot open " + path + ": " + (error != nullptr ? error : "unknown"));
  }
  HipApi api;
  std::vector<std::string> missing = resolveRequired(library, api);
  for (std::string& name : resolveVmm(library, api)) missing.push_back(std::move(name));
  ::dlclose(library);
  return missing;
}

}  // namespace hc::device
