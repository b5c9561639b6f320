// The client's CUDA seam (client/src/runtime_cuda.cc, compiled into this test: libhcclient
// exports only hc_* symbols) in a process that has loaded a CUDA driver: here the fake driver,
// whose SONAME is libcuda.so.1, so the seam's dlopen(RTLD_NOLOAD) finds it as it would the real
// one in a PyTorch process. The fake checks the flags and attributes the seam passes; no GPU is
// involved. cuda_client_runtime_absent_test.cc covers a process without a driver.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "client/src/device_runtime.h"
#include "common/ipc/protocol.h"
#include "tests/unit/daemon/device/cuda/fake_cuda.h"

namespace hc::client {
namespace {

namespace fake_cuda = hc::device::fake_cuda;

class CudaClientRuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // What a CUDA build of PyTorch has done before it calls the client: loaded the driver,
    // initialized it, and created the primary context of the GPUs it uses.
    ::setenv(fake_cuda::kDevicesVariable, "default,default", 1);
    fake_ = new fake_cuda::Inspector();
    ASSERT_TRUE(fake_->ok()) << "cannot load the fake driver at " << HC_FAKE_CUDA_PATH;
    ASSERT_EQ(fake_->init(0), 0);
    ASSERT_EQ(fake_->retainPrimary(1), 1);
    // GPU 1 sits at 0012:3b:1c.0, so that every field of the address is told apart (the seam
    // asks once per device, so this comes before any lookup).
    fake_->setPciAddress(1, 0x0012, 0x3b, 0x1c);
  }
  void SetUp() override {
    ASSERT_NE(fake_, nullptr);
    runtime_ = cudaRuntime();
    ASSERT_NE(runtime_, nullptr) << "the loaded CUDA driver was not found";
  }
  void TearDown() override { EXPECT_EQ(fake_->contextDepth(), 0) << "a context was left current"; }

  static fake_cuda::Inspector* fake_;
  DeviceRuntime* runtime_ = nullptr;
};
fake_cuda::Inspector* CudaClientRuntimeTest::fake_ = nullptr;

// Host memory the fake driver takes for a device allocation while this lives (the address must
// not outlive the declaration: the allocator hands it out again).
class FakeDeviceAllocation {
 public:
  FakeDeviceAllocation(fake_cuda::Inspector& fake, size_t bytes, int device, uint64_t bufferId,
                       bool managed = false)
      : fake_(fake), bytes_(bytes) {
    fake_.addDeviceAllocation(bytes_.data(), bytes_.size(), device, bufferId, managed ? 1 : 0);
  }
  ~FakeDeviceAllocation() { fake_.removeDeviceAllocation(bytes_.data()); }
  uint8_t* data() { return bytes_.data(); }

 private:
  fake_cuda::Inspector& fake_;
  std::vector<uint8_t> bytes_;
};

TEST_F(CudaClientRuntimeTest, FoundOnceLoadedAndNamedCuda) {
  EXPECT_STREQ(runtime_->name(), "cuda");
  EXPECT_EQ(cudaRuntime(), runtime_) << "built once";
}

TEST_F(CudaClientRuntimeTest, DeviceAllocationIsLookedUpWithItsIdentity) {
  FakeDeviceAllocation allocation(*fake_, 4096, /*device=*/1, /*bufferId=*/77);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(allocation.data() + 100, &p));
  EXPECT_EQ(p.memoryType, 2);  // ipc::DeviceMemory::Cuda
  EXPECT_EQ(p.vendor, 1);      // ipc::DeviceVendor::Nvidia
  EXPECT_EQ(p.device, 1);
  EXPECT_EQ(p.allocationId, 77u);
  EXPECT_EQ(p.base, reinterpret_cast<uintptr_t>(allocation.data()));
  EXPECT_EQ(p.bytes, 4096u);
}

TEST_F(CudaClientRuntimeTest, HostAndManagedMemoryAreNotDeviceMemory) {
  std::vector<uint8_t> host(4096);
  DevicePointer p;
  p.bytes = 12345;
  EXPECT_FALSE(runtime_->lookup(host.data(), &p));
  EXPECT_FALSE(runtime_->lookup(nullptr, &p));
  FakeDeviceAllocation managed(*fake_, 4096, 0, 78, /*managed=*/true);
  EXPECT_FALSE(runtime_->lookup(managed.data(), &p));
  EXPECT_EQ(p.bytes, 12345u) << "out must stay untouched when the pointer is not CUDA's";
}

TEST_F(CudaClientRuntimeTest, ExportsALegacyIpcHandleOfTheWholeAllocation) {
  FakeDeviceAllocation allocation(*fake_, 8192, 1, 79);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(allocation.data() + 5000, &p));
  // No context is current on this thread: the seam borrows GPU 1's existing primary context.
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_TRUE(exported.isOk()) << exported.status().toString();
  EXPECT_EQ(exported->handleKind, static_cast<uint32_t>(ipc::HandleKind::LegacyIpc));
  EXPECT_EQ(exported->fd, -1);
  uint64_t magic = 0, base = 0, bytes = 0;
  std::memcpy(&magic, exported->handle, 8);
  std::memcpy(&base, exported->handle + 8, 8);
  std::memcpy(&bytes, exported->handle + 16, 8);
  EXPECT_EQ(magic, fake_cuda::kIpcMagic);
  EXPECT_EQ(base, reinterpret_cast<uintptr_t>(allocation.data()));
  EXPECT_EQ(bytes, 8192u);
}

TEST_F(CudaClientRuntimeTest, ExportFailsWithTheDriversWordsWithoutAContext) {
  // GPU 0's primary context was never created, and the seam must not create one.
  FakeDeviceAllocation allocation(*fake_, 4096, 0, 80);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(allocation.data(), &p));
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_FALSE(exported.isOk());
  EXPECT_EQ(exported.status().code(), Code::DeviceError);
  EXPECT_NE(exported.status().message().find("cuIpcGetMemHandle failed"), std::string::npos)
      << exported.status().message();
}

// A VMM allocation with its memory: made and mapped by the fake as cuMemCreate + cuMemMap would.
class FakeVmmAllocation {
 public:
  FakeVmmAllocation(fake_cuda::Inspector& fake, size_t bytes, int device, uint64_t bufferId,
                    int requestedHandleTypes)
      : fake_(fake),
        data_(static_cast<uint8_t*>(
            fake.createVmmAllocation(bytes, device, bufferId, requestedHandleTypes))) {}
  ~FakeVmmAllocation() {
    if (data_ != nullptr) fake_.removeDeviceAllocation(data_);
  }
  uint8_t* data() { return data_; }

 private:
  fake_cuda::Inspector& fake_;
  uint8_t* data_;
};

constexpr int kPosixFd = 1;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

TEST_F(CudaClientRuntimeTest, VmmAllocationExportsAsAnFdOfTheSameMemory) {
  const size_t bytes = 3 * 4096;
  FakeVmmAllocation allocation(*fake_, bytes, /*device=*/1, /*bufferId=*/90, kPosixFd);
  ASSERT_NE(allocation.data(), nullptr);
  for (size_t i = 0; i < bytes; ++i) allocation.data()[i] = static_cast<uint8_t>(i * 7 + 1);

  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(allocation.data() + 5000, &p));
  EXPECT_EQ(p.base, reinterpret_cast<uintptr_t>(allocation.data())) << "the mapped range";
  EXPECT_EQ(p.bytes, bytes);
  EXPECT_EQ(p.device, 1);
  EXPECT_EQ(p.allocationId, 90u);

  const int before = fake_->liveObjects();
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_TRUE(exported.isOk()) << exported.status().toString();
  EXPECT_EQ(exported->handleKind, static_cast<uint32_t>(ipc::HandleKind::Fd));
  ASSERT_GE(exported->fd, 0);
  EXPECT_EQ(fake_->liveObjects(), before) << "the retained allocation handle must be released";

  // The fd is the allocation: the daemon maps these very bytes, and its writes show here.
  struct stat st {};
  ASSERT_EQ(::fstat(exported->fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), bytes);
  void* view = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, exported->fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(view, allocation.data(), bytes), 0);
  static_cast<uint8_t*>(view)[4097] = 0xee;
  EXPECT_EQ(allocation.data()[4097], 0xee);
  ::munmap(view, bytes);
  ::close(exported->fd);
}

TEST_F(CudaClientRuntimeTest, VmmAllocationWithoutAnFdHandleTypeIsRefusedWithTheReason) {
  FakeVmmAllocation allocation(*fake_, 4096, /*device=*/1, /*bufferId=*/91,
                               /*requestedHandleTypes=*/0);
  ASSERT_NE(allocation.data(), nullptr);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(allocation.data(), &p));
  const int before = fake_->liveObjects();
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_FALSE(exported.isOk());
  EXPECT_EQ(exported.status().code(), Code::InvalidArgument);
  const std::string text = exported.status().message();
  EXPECT_NE(text.find("CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"), std::string::npos) << text;
  EXPECT_NE(text.find("created without"), std::string::npos) << text;
  EXPECT_NE(text.find("allocation 91"), std::string::npos) << text;
  char base[32];
  std::snprintf(base, sizeof(base), "%#llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(allocation.data())));
  EXPECT_NE(text.find(base), std::string::npos) << text;
  EXPECT_EQ(fake_->liveObjects(), before) << "the retained allocation handle must be released";
}

TEST_F(CudaClientRuntimeTest, OrdinaryAllocationNextToVmmMemoryStaysLegacy) {
  FakeVmmAllocation vmm(*fake_, 4096, 1, 92, kPosixFd);
  FakeDeviceAllocation ordinary(*fake_, 4096, 1, 93);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(ordinary.data(), &p));
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_TRUE(exported.isOk()) << exported.status().toString();
  EXPECT_EQ(exported->handleKind, static_cast<uint32_t>(ipc::HandleKind::LegacyIpc));
  EXPECT_EQ(exported->fd, -1);
}

TEST_F(CudaClientRuntimeTest, PciAddressComesFromTheDeviceAttributes) {
  FakeDeviceAllocation one(*fake_, 4096, /*device=*/1, 94);
  FakeDeviceAllocation zero(*fake_, 4096, /*device=*/0, 95);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(one.data(), &p));
  ASSERT_TRUE(p.hasPciAddress);
  // 0012:3b:1c.0 = 0x0012 << 16 | 0x3b << 8 | 0x1c << 3 | 0
  EXPECT_EQ(p.pciAddress, 0x00123be0u);
  DevicePointer q;
  ASSERT_TRUE(runtime_->lookup(zero.data(), &q));
  ASSERT_TRUE(q.hasPciAddress);
  EXPECT_EQ(q.pciAddress, 0x00003a00u);  // the fake's default for GPU 0: 0000:3a:00.0
}

TEST_F(CudaClientRuntimeTest, EveryNonNullStreamIsCudas) {
  int something = 0;
  EXPECT_FALSE(runtime_->ownsStream(nullptr));
  EXPECT_TRUE(runtime_->ownsStream(&something));
  EXPECT_TRUE(runtime_->ownsStream(reinterpret_cast<void*>(0x2)));  // CU_STREAM_PER_THREAD
}

TEST_F(CudaClientRuntimeTest, StreamWaitsOnTheRegisteredWordThroughItsDevicePointer) {
  alignas(64) static std::atomic<uint32_t> words[16];
  ASSERT_TRUE(runtime_->registerHostMemory(words, sizeof(words)).isOk());
  // Registering again (another slab of the same pages) is not an error.
  EXPECT_TRUE(runtime_->registerHostMemory(words, sizeof(words)).isOk());
  int stream = 0;
  uint64_t address = 0;
  uint32_t value = 0;
  const int before = fake_->lastWait(&address, &value);
  ASSERT_TRUE(runtime_->waitValue32(&stream, &words[3], 5).isOk());
  EXPECT_EQ(fake_->lastWait(&address, &value), before + 1);
  EXPECT_EQ(address, reinterpret_cast<uintptr_t>(&words[3]));  // the fake maps identically
  EXPECT_EQ(value, 5u);

  std::atomic<uint32_t> unregistered{0};
  Status refused = runtime_->waitValue32(&stream, &unregistered, 1);
  EXPECT_EQ(refused.code(), Code::DeviceError);
  EXPECT_NE(refused.message().find("cuMemHostGetDevicePointer failed"), std::string::npos)
      << refused.message();
  EXPECT_EQ(runtime_->registerHostMemory(nullptr, 8).code(), Code::InvalidArgument);
}

TEST_F(CudaClientRuntimeTest, HostFunctionsRunOnTheStream) {
  int stream = 0;
  int calls = 0;
  ASSERT_TRUE(runtime_
                  ->launchHostFunc(
                      &stream, [](void* arg) { ++*static_cast<int*>(arg); }, &calls)
                  .isOk());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(runtime_
                ->launchHostFunc(
                    nullptr, [](void*) {}, nullptr)
                .code(),
            Code::DeviceError);
}

}  // namespace
}  // namespace hc::client
