// The client's HIP seam (client/src/runtime_hip.cc) in a process that has loaded a HIP runtime
// with device memory in it: here the fake of fake_libamdhip64_client.cc, loaded by path, whose
// SONAME is libamdhip64.so.5 so that the seam's dlopen(RTLD_NOLOAD) finds it. What is checked is
// what the seam asks of the runtime and what it makes of the answers: the export form (legacy IPC
// handle or VMM fd), that the fd is the allocation's memory, the error of an allocation that
// cannot be shared, the PCI address. Nothing here ran on a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "client/src/device_runtime.h"
#include "common/ipc/protocol.h"

namespace hc::client {
namespace {

constexpr int kPosixFd = 1;  // hipMemHandleTypePosixFileDescriptor

// The fake's controls, from the copy the seam sees.
struct FakeHip {
  FakeHip() {
    handle = ::dlopen(HC_FAKE_HIP_CLIENT_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) return;
    add = reinterpret_cast<AddFn>(::dlsym(handle, "hcFakeHipAddDeviceAllocation"));
    createVmm = reinterpret_cast<CreateVmmFn>(::dlsym(handle, "hcFakeHipCreateVmmAllocation"));
    remove = reinterpret_cast<RemoveFn>(::dlsym(handle, "hcFakeHipRemoveDeviceAllocation"));
    setPci = reinterpret_cast<SetPciFn>(::dlsym(handle, "hcFakeHipSetPciAddress"));
    retained = reinterpret_cast<CountFn>(::dlsym(handle, "hcFakeHipRetainedHandles"));
    peekAtLastError = reinterpret_cast<CountFn>(::dlsym(handle, "hipPeekAtLastError"));
  }
  bool ok() const { return add && createVmm && remove && setPci && retained && peekAtLastError; }

  using AddFn = void (*)(const void*, uint64_t, int, uint64_t);
  using CreateVmmFn = void* (*)(uint64_t, int, uint64_t, int);
  using RemoveFn = void (*)(const void*);
  using SetPciFn = void (*)(int, int, int, int);
  using CountFn = int (*)();
  void* handle = nullptr;  // kept loaded: the seam holds pointers into it
  AddFn add = nullptr;
  CreateVmmFn createVmm = nullptr;
  RemoveFn remove = nullptr;
  SetPciFn setPci = nullptr;
  CountFn retained = nullptr;         // VMM handles retained and not yet released
  CountFn peekAtLastError = nullptr;  // hipPeekAtLastError, as a framework would check it
};

class HipClientRuntimeFakeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fake_ = new FakeHip();
    ASSERT_TRUE(fake_->ok()) << "cannot load the fake runtime at " << HC_FAKE_HIP_CLIENT_PATH;
    // GPU 1 at 00ab:3b:1c.0, so that every field is told apart; before any lookup, since the
    // seam asks once per device.
    fake_->setPci(1, 0x00ab, 0x3b, 0x1c);
  }
  void SetUp() override {
    ASSERT_NE(fake_, nullptr);
    runtime_ = hipRuntime();
    ASSERT_NE(runtime_, nullptr) << "the loaded HIP runtime was not found";
  }
  void TearDown() override {
    EXPECT_EQ(fake_->retained(), 0) << "a retained VMM handle was not released";
    EXPECT_EQ(fake_->peekAtLastError(), 0) << "a probe's failure was left in hipGetLastError";
  }

  static FakeHip* fake_;
  DeviceRuntime* runtime_ = nullptr;
};
FakeHip* HipClientRuntimeFakeTest::fake_ = nullptr;

TEST_F(HipClientRuntimeFakeTest, OrdinaryAllocationExportsALegacyIpcHandle) {
  std::vector<uint8_t> memory(8192);
  fake_->add(memory.data(), memory.size(), /*device=*/1, /*bufferId=*/40);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(memory.data() + 100, &p));
  EXPECT_EQ(p.memoryType, static_cast<uint8_t>(ipc::DeviceMemory::Hip));
  EXPECT_EQ(p.device, 1);
  EXPECT_EQ(p.allocationId, 40u);
  EXPECT_EQ(p.base, reinterpret_cast<uintptr_t>(memory.data()));
  // The calling thread's device is 0: the seam must export through device 1.
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_TRUE(exported.isOk()) << exported.status().toString();
  EXPECT_EQ(exported->handleKind, static_cast<uint32_t>(ipc::HandleKind::LegacyIpc));
  EXPECT_EQ(exported->fd, -1);
  void* named = nullptr;
  std::memcpy(&named, exported->handle, sizeof(named));
  EXPECT_EQ(named, memory.data());
  fake_->remove(memory.data());
}

TEST_F(HipClientRuntimeFakeTest, VmmAllocationExportsAsAnFdOfTheSameMemory) {
  const size_t bytes = 4 * 4096;
  auto* data = static_cast<uint8_t*>(fake_->createVmm(bytes, /*device=*/1, 41, kPosixFd));
  ASSERT_NE(data, nullptr);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(data + 9000, &p));
  EXPECT_EQ(p.base, reinterpret_cast<uintptr_t>(data)) << "the mapped range";
  EXPECT_EQ(p.bytes, bytes);
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_TRUE(exported.isOk()) << exported.status().toString();
  EXPECT_EQ(exported->handleKind, static_cast<uint32_t>(ipc::HandleKind::Fd));
  ASSERT_GE(exported->fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(exported->fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), bytes);
  void* view = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, exported->fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(view, data, bytes), 0);
  static_cast<uint8_t*>(view)[12345] = 0x77;
  EXPECT_EQ(data[12345], 0x77);
  ::munmap(view, bytes);
  ::close(exported->fd);
  fake_->remove(data);
}

TEST_F(HipClientRuntimeFakeTest, VmmAllocationWithoutAnFdHandleTypeIsRefusedWithTheReason) {
  auto* data = static_cast<uint8_t*>(fake_->createVmm(4096, /*device=*/0, 42, 0));
  ASSERT_NE(data, nullptr);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(data, &p));
  Result<ExportedAllocation> exported = runtime_->exportAllocation(p);
  ASSERT_FALSE(exported.isOk());
  EXPECT_EQ(exported.status().code(), Code::DeviceError);
  const std::string text = exported.status().message();
  EXPECT_NE(text.find("hipMemExportToShareableHandle failed: hipErrorNotSupported"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("HIP allocation 42"), std::string::npos) << text;
  EXPECT_NE(text.find("hipMemHandleTypePosixFileDescriptor"), std::string::npos) << text;
  // The fake's own last error of the failed export is the caller's to see, as with any call
  // that failed on its behalf; clear it so the fixture checks only what the seam hid.
  (void)reinterpret_cast<int (*)()>(::dlsym(fake_->handle, "hipGetLastError"))();
  fake_->remove(data);
}

TEST_F(HipClientRuntimeFakeTest, PciAddressComesFromTheDeviceAttributes) {
  std::vector<uint8_t> one(4096);
  std::vector<uint8_t> zero(4096);
  fake_->add(one.data(), one.size(), 1, 43);
  fake_->add(zero.data(), zero.size(), 0, 44);
  DevicePointer p;
  ASSERT_TRUE(runtime_->lookup(one.data(), &p));
  ASSERT_TRUE(p.hasPciAddress);
  EXPECT_EQ(p.pciAddress, 0x00ab3be0u);  // 0x00ab << 16 | 0x3b << 8 | 0x1c << 3 | 0
  DevicePointer q;
  ASSERT_TRUE(runtime_->lookup(zero.data(), &q));
  ASSERT_TRUE(q.hasPciAddress);
  EXPECT_EQ(q.pciAddress, 0x0000c100u);  // the fake's default for GPU 0: 0000:c1:00.0
  fake_->remove(one.data());
  fake_->remove(zero.data());
}

// What lets the daemon let go of memory a caching allocator freed behind the client's back
// (device_cache.h, claimBase): an allocation freed and made again at the same address, of the
// same size, comes back under another allocation id.
TEST_F(HipClientRuntimeFakeTest, MemoryFreedAndAllocatedAgainAtTheSameAddressIsANewAllocation) {
  std::vector<uint8_t> memory(8192);
  fake_->add(memory.data(), memory.size(), 0, 45);
  DevicePointer before;
  ASSERT_TRUE(runtime_->lookup(memory.data() + 8, &before));
  fake_->remove(memory.data());
  fake_->add(memory.data(), memory.size(), 0, 46);
  DevicePointer after;
  ASSERT_TRUE(runtime_->lookup(memory.data() + 8, &after));
  EXPECT_EQ(before.base, after.base);
  EXPECT_EQ(before.bytes, after.bytes);
  EXPECT_EQ(before.allocationId, 45u);
  EXPECT_EQ(after.allocationId, 46u);
  fake_->remove(memory.data());
}

TEST_F(HipClientRuntimeFakeTest, HostMemoryIsNotDeviceMemoryAndLeavesNoError) {
  std::vector<uint8_t> host(4096);
  DevicePointer p;
  EXPECT_FALSE(runtime_->lookup(host.data(), &p));
}

}  // namespace
}  // namespace hc::client
