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
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
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

// A stream of GPU 1's primary context, made as a framework makes its streams (the context is
// current only while the stream is made); destroyed with the object, after its work has run.
class FakeStreamOnGpu1 {
 public:
  explicit FakeStreamOnGpu1(fake_cuda::Inspector& fake) : fake_(fake) {
    void* context = nullptr;
    if (fake_.primaryCtxRetain(&context, 1) != 0) return;
    if (fake_.ctxPush(context) == 0) {
      made_ = fake_.streamCreate(&stream_, /*CU_STREAM_NON_BLOCKING=*/1) == 0;
      void* popped = nullptr;
      (void)fake_.ctxPop(&popped);
    }
    (void)fake_.primaryCtxRelease(1);
  }
  ~FakeStreamOnGpu1() {
    if (made_) (void)fake_.streamDestroy(stream_);
  }
  void* get() const { return made_ ? stream_ : nullptr; }

 private:
  fake_cuda::Inspector& fake_;
  void* stream_ = nullptr;
  bool made_ = false;
};

// The sequence number of the first log line "<seq> <stream> <what>"; 0 when there is none.
uint64_t seqOf(const std::string& log, const std::string& stream, const std::string& what) {
  const std::string tail = " " + stream + " " + what + "\n";
  for (size_t at = log.find(tail); at != std::string::npos; at = log.find(tail, at + 1)) {
    const size_t lineStart = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
    if (log.find(' ', lineStart) == at) return std::stoull(log.substr(lineStart, at - lineStart));
  }
  return 0;
}

TEST_F(CudaClientRuntimeTest, StreamWaitsOnTheRegisteredWordThroughItsDevicePointer) {
  alignas(64) static std::atomic<uint32_t> words[16];
  ASSERT_TRUE(runtime_->registerHostMemory(words, sizeof(words)).isOk());
  // Registering again (another slab of the same pages) is not an error.
  EXPECT_TRUE(runtime_->registerHostMemory(words, sizeof(words)).isOk());
  FakeStreamOnGpu1 stream(*fake_);
  ASSERT_NE(stream.get(), nullptr);
  uint64_t address = 0;
  uint32_t value = 0;
  const int before = fake_->lastWait(&address, &value);
  ASSERT_TRUE(runtime_->waitValue32(stream.get(), &words[3], 5).isOk());
  EXPECT_EQ(fake_->lastWait(&address, &value), before + 1);
  EXPECT_EQ(address, reinterpret_cast<uintptr_t>(&words[3]));  // the fake maps identically
  EXPECT_EQ(value, 5u);

  // Work queued after the wait runs only once the word reaches the value.
  std::atomic<int> ran{0};
  ASSERT_TRUE(runtime_
                  ->launchHostFunc(
                      stream.get(), [](void* arg) { static_cast<std::atomic<int>*>(arg)->store(1); },
                      &ran)
                  .isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ran.load(), 0) << "the host function ran before the word was set";
  words[3].store(5);
  ASSERT_TRUE(runtime_->synchronize(stream.get()).isOk());
  EXPECT_EQ(ran.load(), 1);

  std::atomic<uint32_t> unregistered{0};
  Status refused = runtime_->waitValue32(stream.get(), &unregistered, 1);
  EXPECT_EQ(refused.code(), Code::DeviceError);
  EXPECT_NE(refused.message().find("cuMemHostGetDevicePointer failed"), std::string::npos)
      << refused.message();
  EXPECT_EQ(runtime_->registerHostMemory(nullptr, 8).code(), Code::InvalidArgument);
}

TEST_F(CudaClientRuntimeTest, HostFunctionsRunOnTheStreamAfterItsEarlierWork) {
  FakeStreamOnGpu1 stream(*fake_);
  ASSERT_NE(stream.get(), nullptr);
  struct Seen {
    std::atomic<int> produced{0};
    std::atomic<int> observed{-1};
  } seen;
  ASSERT_EQ(fake_->enqueueKernel(
                stream.get(), "produce-for-host-fn", 50,
                [](void* arg) { static_cast<Seen*>(arg)->produced.store(1); }, &seen),
            0);
  ASSERT_TRUE(runtime_
                  ->launchHostFunc(
                      stream.get(),
                      [](void* arg) {
                        auto* s = static_cast<Seen*>(arg);
                        s->observed.store(s->produced.load());
                      },
                      &seen)
                  .isOk());
  EXPECT_EQ(seen.observed.load(), -1) << "cuLaunchHostFunc must return before its function ran";
  ASSERT_TRUE(runtime_->synchronize(stream.get()).isOk());
  EXPECT_EQ(seen.observed.load(), 1) << "the host function ran before the kernel ended";
  const std::string log = fake_->log();
  EXPECT_NE(log.find("kernel produce-for-host-fn end"), std::string::npos) << log;
}

TEST_F(CudaClientRuntimeTest, DeviceMemoryItAllocatesIsDeviceMemoryOfTheCurrentGpu) {
  // No context is current: cuMemAlloc runs in GPU 1's primary context, which the process made.
  Result<void*> allocated = runtime_->allocateDevice(1000);
  ASSERT_TRUE(allocated.isOk()) << allocated.status().toString();
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(static_cast<uint8_t*>(*allocated) + 999, &p));
  EXPECT_EQ(p.device, 1);
  EXPECT_EQ(p.base, reinterpret_cast<uintptr_t>(*allocated));
  EXPECT_EQ(p.bytes, 1000u);
  ASSERT_TRUE(runtime_->freeDevice(*allocated).isOk());
  EXPECT_FALSE(runtime_->lookup(*allocated, &p)) << "freed memory is no longer the device's";
  EXPECT_EQ(runtime_->freeDevice(*allocated).code(), Code::DeviceError) << "a second free";
}

TEST_F(CudaClientRuntimeTest, CopyToHostRunsAfterTheStreamsEarlierWork) {
  FakeStreamOnGpu1 stream(*fake_);
  ASSERT_NE(stream.get(), nullptr);
  Result<void*> allocated = runtime_->allocateDevice(sizeof(uint64_t));
  ASSERT_TRUE(allocated.isOk()) << allocated.status().toString();
  auto* scalar = static_cast<uint64_t*>(*allocated);
  *scalar = 1;
  // A "kernel" that writes the scalar late; the copy queued after it must see its value.
  ASSERT_EQ(fake_->enqueueKernel(
                stream.get(), "write-scalar", 40,
                [](void* arg) { *static_cast<uint64_t*>(arg) = 0x1122334455667788ull; }, scalar),
            0);
  alignas(64) static uint64_t landing[8];
  ASSERT_TRUE(runtime_->registerHostMemory(landing, sizeof(landing)).isOk());
  landing[1] = 0;
  ASSERT_TRUE(runtime_->copyToHostAsync(stream.get(), &landing[1], scalar, 8).isOk());
  EXPECT_EQ(landing[1], 0u) << "the copy ran before the kernel queued ahead of it";
  ASSERT_TRUE(runtime_->synchronize(stream.get()).isOk());
  EXPECT_EQ(landing[1], 0x1122334455667788ull);
  ASSERT_TRUE(runtime_->freeDevice(*allocated).isOk());
}

TEST_F(CudaClientRuntimeTest, NullStreamIsTheLegacyStreamOfABorrowedContext) {
  // No context is current on this thread: the seam borrows GPU 1's primary context for the call,
  // so the work goes to that context's legacy stream, and the context is popped again.
  std::atomic<int> calls{0};
  ASSERT_TRUE(runtime_
                  ->launchHostFunc(
                      nullptr, [](void* arg) { ++*static_cast<std::atomic<int>*>(arg); }, &calls)
                  .isOk());
  ASSERT_TRUE(runtime_->synchronize(nullptr).isOk());
  EXPECT_EQ(calls.load(), 1);
  const std::string log = fake_->log();
  EXPECT_NE(seqOf(log, "legacy1", "host-fn end"), 0u) << log;
  EXPECT_TRUE(runtime_->checkNotCapturing(nullptr).isOk());
}

TEST_F(CudaClientRuntimeTest, UnknownStreamIsRefusedWithTheDriversError) {
  int notAStream = 0;
  Status refused = runtime_->launchHostFunc(&notAStream, [](void*) {}, nullptr);
  EXPECT_EQ(refused.code(), Code::DeviceError);
  EXPECT_NE(refused.message().find("cuLaunchHostFunc failed: CUDA_ERROR_INVALID_HANDLE"),
            std::string::npos)
      << refused.message();
}

TEST_F(CudaClientRuntimeTest, StreamBeingCapturedIsRefusedAsUnsupported) {
  FakeStreamOnGpu1 stream(*fake_);
  ASSERT_NE(stream.get(), nullptr);
  EXPECT_TRUE(runtime_->checkNotCapturing(stream.get()).isOk());
  ASSERT_EQ(fake_->setCapturing(stream.get(), 1), 0);
  Status refused = runtime_->checkNotCapturing(stream.get());
  EXPECT_EQ(refused.code(), Code::Unsupported);
  EXPECT_NE(refused.message().find("captured into a CUDA graph"), std::string::npos)
      << refused.message();
  ASSERT_EQ(fake_->setCapturing(stream.get(), 0), 0);
  EXPECT_TRUE(runtime_->checkNotCapturing(stream.get()).isOk());
}

}  // namespace
}  // namespace hc::client
