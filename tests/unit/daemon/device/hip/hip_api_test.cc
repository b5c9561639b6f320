// HipApi's symbol table against a real HIP runtime (Debian's libamdhip64.so.5) and the fake one a
// daemon loads in the integration tests: every entry point the backend calls resolves, and loading
// the real one picks the 5.x values of the constants HIP 6.0 renumbered. No HIP function that
// needs a GPU is called.
#include "daemon/device/hip/hip_api.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace hc::device {
namespace {

constexpr const char* kDebianHipLibrary = "libamdhip64.so.5";

bool libraryPresent(const char* name) {
  void* library = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) return false;
  ::dlclose(library);
  return true;
}

TEST(HipApiTest, SymbolNamesAreUniqueAndCoverTheBackend) {
  std::vector<std::string> names = hipApiSymbolNames();
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "an entry point is listed twice";
  for (const char* needed : {"hipInit",
                             "hipGetErrorName",
                             "hipDeviceGetAttribute",
                             "hipDeviceGetName",
                             "hipDeviceTotalMem",
                             "hipDeviceGetPCIBusId",
                             "hipMemGetInfo",
                             "hipIpcOpenMemHandle",
                             "hipIpcCloseMemHandle",
                             "hipMemGetAddressRange",
                             "hipHostMalloc",
                             "hipHostFree",
                             "hipStreamCreateWithFlags",
                             "hipMemcpyAsync",
                             "hipEventCreateWithFlags",
                             "hipEventRecord",
                             "hipEventQuery",
                             "hipModuleLoadData",
                             "hipModuleGetFunction",
                             "hipModuleLaunchKernel"}) {
    EXPECT_EQ(unique.count(needed), 1u) << needed << " is not in the table";
  }
  // hipDeviceProp_t changed layout in 6.0: the backend must never depend on it.
  for (const std::string& name : names) {
    EXPECT_EQ(name.find("Properties"), std::string::npos) << name;
  }
}

TEST(HipApiTest, EverySymbolResolvesInDebianRuntime) {
  if (!libraryPresent(kDebianHipLibrary)) GTEST_SKIP() << kDebianHipLibrary << " not installed";
  Result<std::vector<std::string>> missing = missingHipSymbols(kDebianHipLibrary);
  ASSERT_TRUE(missing.isOk()) << missing.status().toString();
  std::string list;
  for (const std::string& name : missing.value()) list += name + " ";
  EXPECT_TRUE(missing.value().empty()) << "missing from " << kDebianHipLibrary << ": " << list;
}

// The fake runtime the integration tests give a daemon (fake_libamdhip64.cc) has them all too, the
// optional VMM ones included, so that it stands in for the real one without a gap.
TEST(HipApiTest, EverySymbolResolvesInTheDaemonsFakeRuntime) {
  Result<std::vector<std::string>> missing = missingHipSymbols(HC_FAKE_HIP_DAEMON_PATH);
  ASSERT_TRUE(missing.isOk()) << missing.status().toString();
  std::string list;
  for (const std::string& name : missing.value()) list += name + " ";
  EXPECT_TRUE(missing.value().empty()) << "missing from the fake: " << list;
}

// The check itself can fail: a library that is not HIP lacks every entry point.
TEST(HipApiTest, NonHipLibraryLacksEverySymbol) {
  Result<std::vector<std::string>> missing = missingHipSymbols("libm.so.6");
  ASSERT_TRUE(missing.isOk()) << missing.status().toString();
  EXPECT_EQ(missing.value(), hipApiSymbolNames());
}

TEST(HipApiTest, MissingLibraryIsUnavailable) {
  Result<std::vector<std::string>> missing = missingHipSymbols("libhc-test-no-such.so.0");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), Code::Unavailable);
}

TEST(HipApiTest, LoadsDebianRuntimeAsAbi5) {
  if (!libraryPresent(kDebianHipLibrary)) GTEST_SKIP() << kDebianHipLibrary << " not installed";
  std::vector<std::string> names = {"libhc-test-no-such.so.0", kDebianHipLibrary};
  Result<std::shared_ptr<const HipApi>> api = loadHipApi(names);
  ASSERT_TRUE(api.isOk()) << api.status().toString();
  const HipApi& hip = *api.value();
  EXPECT_EQ(hip.libraryName, kDebianHipLibrary);
  EXPECT_EQ(hip.abiMajor, 5);
  // hipIpcMemLazyEnablePeerAccess: 0 in 5.x (1 in 6.x); the runtime rejects any other value.
  EXPECT_EQ(hip.ipcOpenFlags(), 0u);
  EXPECT_NE(hip.hipModuleLaunchKernel, nullptr);
  EXPECT_EQ(hip.errorName(hipErrorNoDevice), "hipErrorNoDevice");
  std::string text = hip.describe(hipErrorNoDevice, "hipGetDeviceCount");
  EXPECT_EQ(text.rfind("hipGetDeviceCount: hipErrorNoDevice", 0), 0u) << text;
  EXPECT_NE(text.find("[100]"), std::string::npos) << text;
}

TEST(HipApiTest, IpcFlagsFollowAbiMajor) {
  HipApi api;
  api.abiMajor = 5;
  EXPECT_EQ(api.ipcOpenFlags(), 0u);
  api.abiMajor = 6;
  EXPECT_EQ(api.ipcOpenFlags(), 1u);
}

// The codes callers act on: back-pressure, their own bad input, no device, and everything else.
TEST(HipApiTest, ToStatusMapsErrorsToCodes) {
  HipApi api;  // no library: names fall back to the number
  EXPECT_EQ(api.toStatus(hipErrorOutOfMemory, "hipHostMalloc").code(), Code::NoResource);
  EXPECT_EQ(api.toStatus(hipErrorInvalidValue, "hipIpcOpenMemHandle").code(),
            Code::InvalidArgument);
  EXPECT_EQ(api.toStatus(hipErrorInvalidDevicePointer, "hipIpcOpenMemHandle").code(),
            Code::InvalidArgument);
  EXPECT_EQ(api.toStatus(hipErrorNoDevice, "hipGetDeviceCount").code(), Code::Unavailable);
  Status fault = api.toStatus(hipErrorLaunchFailure, "hipEventQuery");
  EXPECT_EQ(fault.code(), Code::DeviceError);
  EXPECT_EQ(fault.message(), "hipEventQuery: hipError " +
                                 std::to_string(static_cast<int>(hipErrorLaunchFailure)) + " [" +
                                 std::to_string(static_cast<int>(hipErrorLaunchFailure)) + "]");
}

}  // namespace
}  // namespace hc::device
