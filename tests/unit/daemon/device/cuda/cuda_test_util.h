// What the CUDA backend's tests share: probing the fake driver (fake_libcuda.cc) configured
// through its environment variables, which each test sets and clears.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "daemon/device/cuda/cuda_probe.h"
#include "tests/unit/daemon/device/cuda/fake_cuda.h"

namespace hc::device::testing {

// Sets the fake driver's configuration for one test and clears it afterwards.
class FakeDriverConfig {
 public:
  explicit FakeDriverConfig(const char* devices = nullptr, bool moduleLoadFails = false,
                            bool noProcAddress = false) {
    clear();
    if (devices != nullptr) ::setenv(fake_cuda::kDevicesVariable, devices, 1);
    if (moduleLoadFails) ::setenv(fake_cuda::kModuleLoadFailsVariable, "1", 1);
    if (noProcAddress) ::setenv(fake_cuda::kNoProcAddressVariable, "1", 1);
  }
  ~FakeDriverConfig() { clear(); }
  FakeDriverConfig(const FakeDriverConfig&) = delete;
  FakeDriverConfig& operator=(const FakeDriverConfig&) = delete;

 private:
  static void clear() {
    ::unsetenv(fake_cuda::kDevicesVariable);
    ::unsetenv(fake_cuda::kModuleLoadFailsVariable);
    ::unsetenv(fake_cuda::kNoProcAddressVariable);
  }
};

inline CudaProbeOptions fakeDriver() {
  CudaProbeOptions options;
  options.driverLibrary = HC_FAKE_CUDA_PATH;
  return options;
}

// The first device the fake driver offers (one default-mode GPU unless configured otherwise).
inline std::unique_ptr<CudaDevice> openFakeDevice() {
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  EXPECT_TRUE(probed.isOk()) << probed.status().toString();
  if (!probed.isOk() || probed->devices.empty()) return nullptr;
  return std::move(probed->devices.front());
}

}  // namespace hc::device::testing
