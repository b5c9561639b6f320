// HipApi: every HIP runtime entry point the HIP backend calls, resolved by dlsym from a
// libamdhip64 opened with dlopen, and the conversion of hipError_t into hc::Status. This file and
// hip_api.cc are the only place the backend names a HIP symbol; nothing links libamdhip64, so the
// daemon starts on machines without ROCm and says why HIP is unavailable.
//
// Only calls whose C ABI is the same in HIP 5.x and 6.x are listed. Device properties come from
// hipDeviceGetAttribute / hipDeviceGetName / hipDeviceTotalMem / hipDeviceGetPCIBusId, never from
// hipDeviceProp_t, whose layout changed in 6.0. The constants 6.0 renumbered are answered by
// methods below from the ABI generation the library reports, never taken from the headers this
// was compiled against.
//
// Internal to daemon/device/hip: it includes the HIP headers (types only, __HIP_PLATFORM_AMD__);
// the headers the daemon includes (hip_probe.h, hip_device.h) do not.
#pragma once

#include <hip/hip_runtime_api.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hc::device {

// Threads: immutable once loaded; may be used from any thread.
// Ownership: shared by the probe and every HipDevice (std::shared_ptr). The library itself is
// never unloaded: the HIP runtime starts threads and registers exit handlers that must stay
// mapped until the process ends.
struct HipApi {
  // Each member has the exact type the HIP headers declare, so a signature that drifts between
  // header versions fails to compile instead of corrupting a call.
  decltype(&::hipInit) hipInit = nullptr;
  decltype(&::hipGetErrorName) hipGetErrorName = nullptr;
  decltype(&::hipGetErrorString) hipGetErrorString = nullptr;
  decltype(&::hipRuntimeGetVersion) hipRuntimeGetVersion = nullptr;
  // Devices and their properties.
  decltype(&::hipGetDeviceCount) hipGetDeviceCount = nullptr;
  decltype(&::hipSetDevice) hipSetDevice = nullptr;
  decltype(&::hipDeviceGet) hipDeviceGet = nullptr;
  decltype(&::hipDeviceGetAttribute) hipDeviceGetAttribute = nullptr;
  decltype(&::hipDeviceGetName) hipDeviceGetName = nullptr;
  decltype(&::hipDeviceTotalMem) hipDeviceTotalMem = nullptr;
  decltype(&::hipDeviceGetPCIBusId) hipDeviceGetPCIBusId = nullptr;
  decltype(&::hipMemGetInfo) hipMemGetInfo = nullptr;
  // Client buffers (legacy IPC handles) and pinned staging memory.
  decltype(&::hipIpcOpenMemHandle) hipIpcOpenMemHandle = nullptr;
  decltype(&::hipIpcCloseMemHandle) hipIpcCloseMemHandle = nullptr;
  decltype(&::hipMemGetAddressRange) hipMemGetAddressRange = nullptr;
  // The C entry point, not the header's C++ template overload for typed pointers.
  decltype(static_cast<hipError_t (*)(void**, size_t, unsigned int)>(
      &::hipHostMalloc)) hipHostMalloc = nullptr;
  decltype(&::hipHostFree) hipHostFree = nullptr;
  // The daemon's own device memory (scratch of reductions across GPUs); again the C entry point.
  decltype(static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc)) hipMalloc = nullptr;
  decltype(&::hipFree) hipFree = nullptr;
  // Streams, copies and events.
  decltype(&::hipStreamCreateWithFlags) hipStreamCreateWithFlags = nullptr;
  decltype(&::hipStreamDestroy) hipStreamDestroy = nullptr;
  decltype(&::hipStreamSynchronize) hipStreamSynchronize = nullptr;
  decltype(&::hipMemcpyAsync) hipMemcpyAsync = nullptr;
  decltype(&::hipEventCreateWithFlags) hipEventCreateWithFlags = nullptr;
  decltype(&::hipEventRecord) hipEventRecord = nullptr;
  decltype(&::hipEventQuery) hipEventQuery = nullptr;
  decltype(&::hipEventDestroy) hipEventDestroy = nullptr;
  // The reduction kernels' module.
  decltype(&::hipModuleLoadData) hipModuleLoadData = nullptr;
  decltype(&::hipModuleUnload) hipModuleUnload = nullptr;
  decltype(&::hipModuleGetFunction) hipModuleGetFunction = nullptr;
  decltype(&::hipModuleLaunchKernel) hipModuleLaunchKernel = nullptr;
  // Client buffers that are VMM allocations (hipMemCreate), imported by POSIX fd. Optional: HIP
  // has them since 5.1 (symbol version hip_5.1); a runtime without them still loads and imports
  // legacy IPC handles, and hasVmm() is false. Not hipMemGetAllocationGranularity: its
  // hipMemAllocationProp argument changed layout in 6.0.
  decltype(&::hipMemImportFromShareableHandle) hipMemImportFromShareableHandle = nullptr;
  decltype(&::hipMemAddressReserve) hipMemAddressReserve = nullptr;
  decltype(&::hipMemAddressFree) hipMemAddressFree = nullptr;
  decltype(&::hipMemMap) hipMemMap = nullptr;
  decltype(&::hipMemUnmap) hipMemUnmap = nullptr;
  decltype(&::hipMemSetAccess) hipMemSetAccess = nullptr;
  decltype(&::hipMemRelease) hipMemRelease = nullptr;

  std::string libraryName;  // the name dlopen() accepted, e.g. "libamdhip64.so.5"
  // 5 or 6: the ABI generation, from hipRuntimeGetVersion() when it answers, else from the
  // soname (the 5.2 runtime reports version 0 until a device initialises).
  int abiMajor = 0;
  int runtimeVersion = 0;  // hipRuntimeGetVersion() at load, 0 when it did not say

  // Every VMM entry point above resolved.
  bool hasVmm() const;
  // Flags for hipIpcOpenMemHandle: hipIpcMemLazyEnablePeerAccess, 0 in 5.x and 1 in 6.x; the
  // runtime rejects any other value.
  unsigned int ipcOpenFlags() const;
  // "hipErrorNoDevice", or "hipError 100" when the runtime cannot name it.
  std::string errorName(hipError_t error) const;
  // "hipInit: hipErrorNoDevice (no ROCm-capable device is detected) [100]"
  std::string describe(hipError_t error, std::string_view call) const;
  // The Status for a failed call: NoResource for out-of-memory, InvalidArgument for bad values,
  // pointers and handles, Unavailable when there is no usable device or runtime, DeviceError
  // otherwise. Logs it once here, where the foreign error enters (device errors as errors, the
  // rest at debug level: callers decide whether those matter).
  Status toStatus(hipError_t error, std::string_view call) const;
};

// Opens the first library of `names` that loads and has every entry point above. Unavailable,
// "HIP unavailable: no usable libamdhip64 (<why, per library>)", naming dlopen's message or the
// missing symbols, when none does. Calls no HIP function but hipRuntimeGetVersion: hipInit and
// its failure belong to probeHipDevices().
[[nodiscard]] Result<std::shared_ptr<const HipApi>> loadHipApi(std::span<const std::string> names);

// The symbol names HipApi resolves, in declaration order, the optional VMM ones included.
std::vector<std::string> hipApiSymbolNames();
// The names of hipApiSymbolNames() that the library at `path` lacks; Unavailable when it does
// not open. Proves the table complete against a real runtime.
[[nodiscard]] Result<std::vector<std::string>> missingHipSymbols(const std::string& path);

}  // namespace hc::device

// Returns the call's Status from the enclosing function when a HIP call fails:
//   HC_HIP_TRY(*api_, hipMemGetInfo, &free, &total);
#define HC_HIP_TRY(api, entry, ...)                            \
  do {                                                         \
    const hipError_t hc_hip_error_ = (api).entry(__VA_ARGS__); \
    if (hc_hip_error_ != hipSuccess) {                         \
      return (api).toStatus(hc_hip_error_, #entry);            \
    }                                                          \
  } while (0)
