// The client's CUDA seam (client/src/runtime_cuda.cc) in a process that never loaded a CUDA
// driver: it is not found, and the client does not load one itself. Its own binary, because
// cudaRuntime() decides once per process.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "client/src/device_runtime.h"

namespace hc::client {
namespace {

TEST(CudaClientRuntimeAbsentTest, NotFoundWithoutALoadedDriver) {
  ASSERT_EQ(::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY), nullptr)
      << "this test process has a CUDA driver loaded";
  EXPECT_EQ(cudaRuntime(), nullptr);
  EXPECT_EQ(::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY), nullptr)
      << "looking for the runtime loaded a driver";
}

}  // namespace
}  // namespace hc::client
