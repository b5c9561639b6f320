#include "daemon/device/cuda/cuda_probe.h"

#include <string>
#include <utility>

#include "daemon/device/cuda/cuda_api.h"

namespace hc::device {
namespace {

// Why cuInit failed, in the words an operator acts on.
std::string initFailure(const CudaDriver& driver, CUresult result) {
  const std::string call = driver.describe(result, driver.init.name);
  switch (result) {
    case CUDA_ERROR_STUB_LIBRARY:
      return driver.library() + " is the CUDA toolkit's stub library, not an NVIDIA driver (" +
             call +
             "); install the driver, or take the toolkit's stubs directory off the library path";
    case CUDA_ERROR_NO_DEVICE:
      return "the driver sees no CUDA device (" + call + ")";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "the NVIDIA kernel module and " + driver.library() +
             " come from different driver versions (" + call + ")";
    default:
      return "cuInit failed (" + call + ")";
  }
}

std::string joined(const std::vector<std::string>& reasons) {
  std::string text;
  for (const std::string& reason : reasons) text += (text.empty() ? "" : "; ") + reason;
  return text;
}

}  // namespace

Result<CudaProbeResult> probeCudaDevices(const CudaProbeOptions& options) {
  Result<std::shared_ptr<CudaDriver>> loaded = CudaDriver::load(options.driverLibrary);
  if (!loaded.isOk()) return loaded.status();
  std::shared_ptr<CudaDriver> driver = std::move(loaded).value();

  const CUresult initialized = driver->init(0);
  if (initialized != CUDA_SUCCESS) {
    return unavailable("CUDA unavailable: " + initFailure(*driver, initialized));
  }
  // The driver now runs threads of its own: never unload it (see CudaDriver::keepLoaded).
  driver->keepLoaded();

  CudaProbeResult result;
  if (driver->driverGetVersion(&result.driverVersion) != CUDA_SUCCESS) result.driverVersion = 0;
  int count = 0;
  const CUresult counted = driver->deviceGetCount(&count);
  if (counted != CUDA_SUCCESS) {
    return unavailable("CUDA unavailable: " +
                       driver->describe(counted, driver->deviceGetCount.name));
  }
  if (count <= 0) return unavailable("CUDA unavailable: the driver reports no CUDA device");

  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Result<std::unique_ptr<CudaDevice>> opened = CudaDevice::open(driver, ordinal);
    if (!opened.isOk()) {
      const std::string why = opened.status().message();
      result.skipped.push_back(
          why.rfind("GPU ", 0) == 0 ? why : "GPU " + std::to_string(ordinal) + ": " + why);
      continue;
    }
    result.devices.push_back(std::move(opened).value());
  }
  if (result.devices.empty()) {
    return unavailable("CUDA unavailable: no usable CUDA device: " + joined(result.skipped));
  }
  return result;
}

}  // namespace hc::device
