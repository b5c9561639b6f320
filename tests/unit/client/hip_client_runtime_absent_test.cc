// The client's HIP seam in a process that never loaded a HIP runtime: hipRuntime() is null, and
// asking does not load one (the client never brings a GPU runtime into a process).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "client/src/device_runtime.h"

namespace hc::client {
namespace {

bool hipLoaded() {
  for (const char* name : {"libamdhip64.so.6", "libamdhip64.so.5"}) {
    if (::dlopen(name, RTLD_NOLOAD | RTLD_LAZY) != nullptr) return true;
  }
  return false;
}

TEST(HipClientRuntimeAbsentTest, NullWhenTheProcessHasNoHip) {
  ASSERT_FALSE(hipLoaded()) << "this test binary must not link libamdhip64";
  EXPECT_EQ(hipRuntime(), nullptr);
  EXPECT_FALSE(hipLoaded()) << "hipRuntime() loaded the HIP runtime";
}

}  // namespace
}  // namespace hc::client
