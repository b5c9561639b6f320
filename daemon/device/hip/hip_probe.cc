#include "daemon/device/hip/hip_probe.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <span>
#include <string>
#include <utility>

#include "daemon/device/hip/hip_api.h"
#include "daemon/device/hip/hip_kernel_image.h"

namespace hc::device {
namespace {

// "; no /dev/kfd (...)" when the amdgpu compute node is missing, else "".
std::string kfdHint(const std::string& kfdPath) {
  if (kfdPath.empty() || ::access(kfdPath.c_str(), F_OK) == 0) return "";
  return "; no " + kfdPath +
         " (the amdgpu kernel driver is not loaded, or the device is not passed to this "
         "container)";
}

std::string joined(const std::vector<std::string>& reasons) {
  std::string text;
  for (const std::string& reason : reasons) text += (text.empty() ? "" : "; ") + reason;
  return text;
}

std::string mebibytes(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

Result<HipProbeResult> probeHipDevices(const HipProbeOptions& options) {
  Result<std::shared_ptr<const HipApi>> loaded = loadHipApi(options.libraryNames);
  if (!loaded.isOk()) return loaded.status();  // already "HIP unavailable: ..."
  std::shared_ptr<const HipApi> api = std::move(loaded).value();
  const HipApi& hip = *api;

  const hipError_t initialized = hip.hipInit(0);
  if (initialized != hipSuccess) {
    return unavailable("HIP unavailable: hipInit failed: " + hip.errorName(initialized) + " [" +
                       std::to_string(static_cast<int>(initialized)) + "] (" + hip.libraryName +
                       ")" + kfdHint(options.kfdPath));
  }
  HipProbeResult result;
  result.library = hip.libraryName;
  if (hip.hipRuntimeGetVersion(&result.runtimeVersion) != hipSuccess) result.runtimeVersion = 0;
  int count = 0;
  const hipError_t counted = hip.hipGetDeviceCount(&count);
  if (counted != hipSuccess || count <= 0) {
    const std::string why = counted != hipSuccess ? hip.describe(counted, "hipGetDeviceCount")
                                                  : "the runtime reports 0 devices";
    return unavailable("HIP unavailable: no devices (" + why + ")" + kfdHint(options.kfdPath));
  }

  std::span<const uint8_t> kernelImage;
  if (options.loadKernels) kernelImage = reduceKernelBundle();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Result<std::unique_ptr<HipDevice>> opened = HipDevice::open(api, ordinal, kernelImage);
    if (!opened.isOk()) {
      result.skipped.push_back("GPU " + std::to_string(ordinal) + ": " + opened.status().message());
      continue;
    }
    const HipDevice& device = *opened.value();
    spdlog::info("HIP GPU {}: {} ({}), {} of memory, daemon setup uses {}, reductions {}", ordinal,
                 device.info().model, device.info().pciBusId, mebibytes(device.info().memoryBytes),
                 mebibytes(device.memoryUse().setupBytes()),
                 device.capabilities().reduceKernels ? "on the GPU" : "staged through the host");
    result.devices.push_back(std::move(opened).value());
  }
  if (result.devices.empty()) {
    return unavailable("HIP unavailable: no usable HIP device: " + joined(result.skipped) +
                       kfdHint(options.kfdPath));
  }
  for (const std::string& why : result.skipped) spdlog::warn("HIP: skipping {}", why);
  return result;
}

}  // namespace hc::device
