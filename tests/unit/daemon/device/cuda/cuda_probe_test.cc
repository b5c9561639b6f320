// probeCudaDevices() where there is no GPU: without any driver library, against the CUDA toolkit's
// stub library, and against the fake driver (fake_libcuda.cc) for the paths a real driver takes
// (devices found, exclusive compute mode, no device, kernels that do not load). Also the embedded
// kernel image. Nothing here runs on a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <string_view>

#include "daemon/device/cuda/cuda_api.h"
#include "daemon/device/cuda/cuda_kernel_image.h"
#include "daemon/device/cuda/cuda_probe.h"
#include "daemon/device/kernels/reduce_args.h"
#include "tests/unit/daemon/device/cuda/cuda_test_util.h"

namespace hc::device {
namespace {

using testing::fakeDriver;
using testing::FakeDriverConfig;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kToolkitStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

TEST(CudaProbeTest, WithoutDriverLibraryIsUnavailableWithReason) {
  CudaProbeOptions options;
  options.driverLibrary = "libcuda-hc-test-does-not-exist.so.1";
  Result<CudaProbeResult> probed = probeCudaDevices(options);
  ASSERT_FALSE(probed.isOk());
  EXPECT_EQ(probed.status().code(), Code::Unavailable);
  EXPECT_THAT(probed.status().message(), StartsWith("CUDA unavailable: "));
  EXPECT_THAT(probed.status().message(), HasSubstr("cannot load libcuda-hc-test-does-not-exist"));
}

TEST(CudaProbeTest, AgainstToolkitStubIsUnavailableAndNamesTheStub) {
  if (::access(kToolkitStub, R_OK) != 0) GTEST_SKIP() << "no CUDA toolkit stub at " << kToolkitStub;
  CudaProbeOptions options;
  options.driverLibrary = kToolkitStub;
  Result<CudaProbeResult> probed = probeCudaDevices(options);
  ASSERT_FALSE(probed.isOk());
  EXPECT_EQ(probed.status().code(), Code::Unavailable);
  EXPECT_THAT(probed.status().message(), StartsWith("CUDA unavailable: "));
  EXPECT_THAT(probed.status().message(), HasSubstr("stub library"));
  EXPECT_THAT(probed.status().message(), HasSubstr("CUDA_ERROR_STUB_LIBRARY"));
}

TEST(CudaProbeTest, StubEntryPointsResolveByDlsymFallback) {
  if (::access(kToolkitStub, R_OK) != 0) GTEST_SKIP() << "no CUDA toolkit stub at " << kToolkitStub;
  // The stub answers cuGetProcAddress_v2 with CUDA_ERROR_STUB_LIBRARY; every versioned symbol
  // must still be found by name.
  Result<std::shared_ptr<CudaDriver>> driver = CudaDriver::load(kToolkitStub);
  ASSERT_TRUE(driver.isOk()) << driver.status().toString();
  EXPECT_FALSE((*driver)->resolvedByProcAddress());
  EXPECT_EQ((*driver)->init(0), CUDA_ERROR_STUB_LIBRARY);
  EXPECT_EQ((*driver)->errorName(CUDA_ERROR_STUB_LIBRARY), "CUDA_ERROR_STUB_LIBRARY");
}

TEST(CudaProbeTest, EmbeddedFatbinStartsWithMagicAndHoldsEveryKernel) {
  const std::span<const uint8_t> image = reduceKernelFatbin();
  ASSERT_GT(image.size(), 16u);
  uint32_t magic = 0;
  std::memcpy(&magic, image.data(), sizeof(magic));
  EXPECT_EQ(magic, 0xba55ed50u);
  EXPECT_EQ(magic, kFatbinMagic);
  // The launch ABI's names are in the image (the PTX, at least, spells them out).
  const std::string_view bytes(reinterpret_cast<const char*>(image.data()), image.size());
  for (const char* name : kernels::kReduceKernelNames) {
    EXPECT_NE(bytes.find(name), std::string_view::npos) << name;
  }
}

TEST(CudaProbeTest, FakeDriverResolvesEntryPointsThroughGetProcAddress) {
  FakeDriverConfig config;
  Result<std::shared_ptr<CudaDriver>> driver = CudaDriver::load(HC_FAKE_CUDA_PATH);
  ASSERT_TRUE(driver.isOk()) << driver.status().toString();
  // The fake returns a _v2 symbol only when asked at the version that introduced it, so this
  // also checks the version of every entry point.
  EXPECT_TRUE((*driver)->resolvedByProcAddress());
}

TEST(CudaProbeTest, FallsBackToDlsymWhenGetProcAddressFails) {
  FakeDriverConfig config(nullptr, false, /*noProcAddress=*/true);
  Result<std::shared_ptr<CudaDriver>> driver = CudaDriver::load(HC_FAKE_CUDA_PATH);
  ASSERT_TRUE(driver.isOk()) << driver.status().toString();
  EXPECT_FALSE((*driver)->resolvedByProcAddress());
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_TRUE(probed.isOk()) << probed.status().toString();
  EXPECT_EQ(probed->devices.size(), 1u);
}

TEST(CudaProbeTest, FindsEveryGpuWithItsPropertiesAndFootprint) {
  FakeDriverConfig config("default,default");
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_TRUE(probed.isOk()) << probed.status().toString();
  EXPECT_EQ(probed->driverVersion, fake_cuda::kDriverVersion);
  EXPECT_TRUE(probed->skipped.empty());
  ASSERT_EQ(probed->devices.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const CudaDevice& device = *probed->devices[i];
    EXPECT_EQ(device.ordinal(), i);
    EXPECT_EQ(device.info().index, i);
    EXPECT_EQ(device.info().vendor, Vendor::Nvidia);
    EXPECT_EQ(device.info().backend, "cuda");
    EXPECT_EQ(device.info().model, "Fake GPU " + std::to_string(i));
    EXPECT_EQ(device.info().memoryBytes, uint64_t{16} << 30);
    EXPECT_EQ(device.info().pciBusId, i == 0 ? "0000:3a:00.0" : "0000:3b:00.0");  // lower case
    EXPECT_TRUE(device.capabilities().ipcImport);
    EXPECT_TRUE(device.capabilities().reduceKernels);
    EXPECT_TRUE(device.capabilities().streamOrdering);
    EXPECT_TRUE(device.capabilities().pinnedStaging);
    EXPECT_TRUE(device.stagingFallbackReason().empty());
    // The fake's context takes 300 MiB before the first reading; the module takes 2 MiB after.
    EXPECT_EQ(device.memoryUse().totalBytes, uint64_t{16} << 30);
    EXPECT_EQ(device.memoryUse().freeAtContextBytes, (uint64_t{16} << 30) - (uint64_t{300} << 20));
    EXPECT_EQ(device.memoryUse().setupBytes(), uint64_t{2} << 20);
  }
}

TEST(CudaProbeTest, SkipsExclusiveProcessGpuAndSaysWhy) {
  FakeDriverConfig config("default,exclusive");
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_TRUE(probed.isOk()) << probed.status().toString();
  ASSERT_EQ(probed->devices.size(), 1u);
  EXPECT_EQ(probed->devices[0]->ordinal(), 0);
  ASSERT_EQ(probed->skipped.size(), 1u);
  EXPECT_THAT(probed->skipped[0], StartsWith("GPU 1 (Fake GPU 1, 0000:3b:00.0)"));
  EXPECT_THAT(probed->skipped[0], HasSubstr("EXCLUSIVE_PROCESS"));
  EXPECT_THAT(probed->skipped[0], HasSubstr("the daemon and the training process"));
}

TEST(CudaProbeTest, OnlyUnusableGpusMakeCudaUnavailable) {
  FakeDriverConfig config("exclusive,prohibited");
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_FALSE(probed.isOk());
  EXPECT_EQ(probed.status().code(), Code::Unavailable);
  EXPECT_THAT(probed.status().message(), StartsWith("CUDA unavailable: no usable CUDA device: "));
  EXPECT_THAT(probed.status().message(), HasSubstr("GPU 0"));
  EXPECT_THAT(probed.status().message(), HasSubstr("EXCLUSIVE_PROCESS"));
  EXPECT_THAT(probed.status().message(), HasSubstr("GPU 1"));
  EXPECT_THAT(probed.status().message(), HasSubstr("PROHIBITED"));
}

TEST(CudaProbeTest, NoDeviceIsUnavailable) {
  FakeDriverConfig config("");
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_FALSE(probed.isOk());
  EXPECT_EQ(probed.status().code(), Code::Unavailable);
  EXPECT_THAT(probed.status().message(), StartsWith("CUDA unavailable: "));
  EXPECT_THAT(probed.status().message(), HasSubstr("no CUDA device"));
}

TEST(CudaProbeTest, KernelsThatDoNotLoadFallBackToStaging) {
  FakeDriverConfig config("default", /*moduleLoadFails=*/true);
  Result<CudaProbeResult> probed = probeCudaDevices(fakeDriver());
  ASSERT_TRUE(probed.isOk()) << probed.status().toString();
  ASSERT_EQ(probed->devices.size(), 1u);
  CudaDevice& device = *probed->devices[0];
  EXPECT_FALSE(device.capabilities().reduceKernels);
  EXPECT_THAT(device.stagingFallbackReason(), HasSubstr("cuModuleLoadData"));
  EXPECT_THAT(device.stagingFallbackReason(), HasSubstr("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
  // Everything else still works; reductions say where to go instead.
  Result<StreamId> stream = device.createStream();
  ASSERT_TRUE(stream.isOk()) << stream.status().toString();
  float in = 1.0f, out = 0.0f;
  const void* inputs[] = {&in};
  void* outputs[] = {&out};
  ReduceWork work;
  work.dtype = Dtype{kernels::kDtypeFloat32};
  work.redop = RedOp{kernels::kRedopSum};
  work.inputs = inputs;
  work.outputs = outputs;
  work.nRanks = 1;
  work.count = 1;
  Status reduced = device.reduceAsync(*stream, work);
  EXPECT_EQ(reduced.code(), Code::DeviceError);
  EXPECT_THAT(reduced.message(), HasSubstr("stage the reduction through host memory"));
  EXPECT_TRUE(device.destroyStream(*stream).isOk());
}

}  // namespace
}  // namespace hc::device
