// The client's HIP seam (client/src/runtime_hip.cc) in a process that has loaded Debian's HIP
// runtime but has no AMD GPU: the runtime is found (RTLD_NOLOAD sees the library), and every
// query answers "not HIP's" or a clear error instead of crashing. What needs a GPU (a device
// pointer, an IPC handle, a stream) is not exercised here.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "client/src/device_runtime.h"

namespace hc::client {
namespace {

constexpr const char* kDebianHipLibrary = "libamdhip64.so.5";

class HipClientRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // What a ROCm build of PyTorch does before it calls the client.
    static void* library = ::dlopen(kDebianHipLibrary, RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) GTEST_SKIP() << kDebianHipLibrary << " not installed";
    runtime_ = hipRuntime();
    ASSERT_NE(runtime_, nullptr) << "the loaded HIP runtime was not found";
  }
  DeviceRuntime* runtime_ = nullptr;
};

TEST_F(HipClientRuntimeTest, FoundOnceLoadedAndNamedHip) {
  EXPECT_STREQ(runtime_->name(), "hip");
  EXPECT_EQ(hipRuntime(), runtime_) << "built once";
}

TEST_F(HipClientRuntimeTest, HostMemoryIsNotDeviceMemory) {
  std::vector<uint8_t> host(4096);
  DevicePointer p;
  p.bytes = 12345;
  EXPECT_FALSE(runtime_->lookup(host.data(), &p));
  EXPECT_EQ(p.bytes, 12345u) << "out must stay untouched when the pointer is not HIP's";
  EXPECT_FALSE(runtime_->lookup(nullptr, &p));
}

TEST_F(HipClientRuntimeTest, ForeignStreamsAreNotOwned) {
  int notAStream = 0;
  EXPECT_FALSE(runtime_->ownsStream(nullptr));
  EXPECT_FALSE(runtime_->ownsStream(&notAStream));
}

TEST_F(HipClientRuntimeTest, CallsWithoutADeviceFailWithHipErrorNames) {
  std::vector<uint8_t> page(4096);
  Status registered = runtime_->registerHostMemory(page.data(), page.size());
  ASSERT_FALSE(registered.isOk()) << "registered host memory without a GPU?";
  EXPECT_EQ(registered.code(), Code::DeviceError);
  EXPECT_NE(registered.message().find("hipHostRegister failed: hipError"), std::string::npos)
      << registered.message();

  DevicePointer p;
  p.base = reinterpret_cast<uintptr_t>(page.data());
  p.bytes = page.size();
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_FALSE(exported.isOk());
  EXPECT_EQ(exported.status().code(), Code::DeviceError);

  EXPECT_FALSE(runtime_->registerHostMemory(nullptr, 0).isOk());

  static std::atomic<int> calls{0};
  Status launched = runtime_->launchHostFunc(
      nullptr, [](void*) { calls.fetch_add(1); }, nullptr);
  EXPECT_FALSE(launched.isOk());
  EXPECT_NE(launched.message().find("failed: hipError"), std::string::npos) << launched.message();
  EXPECT_EQ(calls.load(), 0) << "a host function that was not enqueued must never run";

  std::atomic<uint32_t> word{0};
  Status waited = runtime_->waitValue32(nullptr, &word, 1);
  EXPECT_FALSE(waited.isOk());
  EXPECT_EQ(waited.code(), Code::DeviceError);
}

}  // namespace
}  // namespace hc::client
