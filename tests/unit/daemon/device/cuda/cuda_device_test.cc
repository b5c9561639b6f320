// CudaDevice against the fake driver (fake_libcuda.cc): imports and their bounds checks, pinned
// memory, streams, copies and events, the context discipline (every driver call inside a pushed
// context, none left current afterwards), and cleanup of what callers leave behind. The fake
// checks the flags the backend passes (lazy peer access, portable device-mapped pinned memory,
// non-blocking streams, events without timing, read-write VMM access). No GPU is involved.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "tests/unit/daemon/device/cuda/cuda_test_util.h"
#include "tests/unit/daemon/device/memfd_allocation.h"

namespace hc::device {
namespace {

using testing::FakeDriverConfig;
using ::testing::HasSubstr;
using testing::MemfdAllocation;
using testing::openFakeDevice;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.ok()) << "cannot inspect the fake driver at " << HC_FAKE_CUDA_PATH;
    device_ = openFakeDevice();
    ASSERT_NE(device_, nullptr);
  }
  void TearDown() override {
    // No context may stay current on the caller's thread after any call.
    EXPECT_EQ(fake_.contextDepth(), 0);
    device_.reset();
    // The device gave back everything it held, leftovers included.
    EXPECT_EQ(fake_.liveObjects(), 0);
  }

  BufferHandle legacyHandle(const void* allocation, uint64_t allocationBytes, uint64_t claimed) {
    BufferHandle handle;
    handle.type = MemoryType::Cuda;
    handle.bytes.resize(64);
    fake_.makeIpcHandle(allocation, allocationBytes, handle.bytes.data());
    handle.size = claimed;
    return handle;
  }

  FakeDriverConfig config_;
  fake_cuda::Inspector fake_;
  std::unique_ptr<CudaDevice> device_;
};

TEST_F(CudaDeviceTest, LegacyIpcImportMapsTheAllocation) {
  std::vector<uint8_t> allocation(4096, 0x5A);
  Result<ImportedBuffer> imported =
      device_->importBuffer(legacyHandle(allocation.data(), 4096, 4096));
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  EXPECT_EQ(imported->ptr, allocation.data());
  EXPECT_EQ(imported->size, 4096u);
  EXPECT_NE(imported->id, 0u);
  EXPECT_EQ(fake_.openIpcHandles(), 1);
  ImportedBuffer buffer = *imported;
  ASSERT_TRUE(device_->releaseBuffer(buffer).isOk());
  EXPECT_EQ(buffer.ptr, nullptr);
  EXPECT_EQ(fake_.openIpcHandles(), 0);
  EXPECT_EQ(device_->releaseBuffer(*imported).code(), Code::NotFound);
}

TEST_F(CudaDeviceTest, LegacyIpcImportRefusesAClaimLargerThanTheAllocation) {
  std::vector<uint8_t> allocation(4096);
  Result<ImportedBuffer> imported =
      device_->importBuffer(legacyHandle(allocation.data(), 4096, 8192));
  ASSERT_FALSE(imported.isOk());
  EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("holds 4096 bytes"));
  EXPECT_THAT(imported.status().message(), HasSubstr("8192"));
  EXPECT_EQ(fake_.openIpcHandles(), 0) << "the refused handle must be closed again";
}

TEST_F(CudaDeviceTest, ImportRefusesMalformedHandles) {
  BufferHandle wrongType = legacyHandle(this, 64, 64);
  wrongType.type = MemoryType::Sim;
  EXPECT_EQ(device_->importBuffer(wrongType).status().code(), Code::InvalidArgument);
  BufferHandle shortHandle = legacyHandle(this, 64, 64);
  shortHandle.bytes.resize(10);
  Result<ImportedBuffer> refused = device_->importBuffer(shortHandle);
  EXPECT_EQ(refused.status().code(), Code::InvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("64 bytes, not 10"));
  EXPECT_EQ(device_->importBuffer(legacyHandle(this, 64, 0)).status().code(),
            Code::InvalidArgument);
}

TEST_F(CudaDeviceTest, VmmFdImportMapsTheAllocationReadWrite) {
  const size_t bytes = 2 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(bytes);
  ASSERT_NE(allocation.view(), nullptr);
  std::memset(allocation.view(), 0x11, bytes);
  BufferHandle handle;
  handle.type = MemoryType::Cuda;
  handle.fd = allocation.fd();
  handle.size = bytes - 100;  // a claim inside the allocation, not a whole number of pages
  Result<ImportedBuffer> imported = device_->importBuffer(handle);
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  auto* mapped = static_cast<uint8_t*>(imported->ptr);
  EXPECT_EQ(mapped[0], 0x11);
  mapped[bytes - 101] = 0x22;  // writable, and shared with the exporter
  EXPECT_EQ(allocation.view()[bytes - 101], 0x22);
  // The caller still owns its fd.
  EXPECT_NE(::fcntl(allocation.fd(), F_GETFD), -1);
  ImportedBuffer buffer = *imported;
  EXPECT_TRUE(device_->releaseBuffer(buffer).isOk());
}

TEST_F(CudaDeviceTest, VmmFdImportRefusesAClaimLargerThanTheAllocation) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(page);
  BufferHandle handle;
  handle.type = MemoryType::Cuda;
  handle.fd = allocation.fd();
  handle.size = page + 1;
  Result<ImportedBuffer> imported = device_->importBuffer(handle);
  ASSERT_FALSE(imported.isOk());
  EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("smaller than the"));
}

TEST_F(CudaDeviceTest, CopiesBetweenPinnedAndImportedMemoryInStreamOrder) {
  std::vector<uint8_t> allocation(1000);
  Result<ImportedBuffer> imported =
      device_->importBuffer(legacyHandle(allocation.data(), 1000, 1000));
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  Result<void*> pinned = device_->allocPinned(1000);
  ASSERT_TRUE(pinned.isOk()) << pinned.status().toString();
  std::memset(*pinned, 0x7E, 1000);
  Result<StreamId> stream = device_->createStream();
  ASSERT_TRUE(stream.isOk()) << stream.status().toString();

  ASSERT_TRUE(device_->copyAsync(*stream, imported->ptr, *pinned, 1000).isOk());
  Result<EventId> event = device_->recordEvent(*stream);
  ASSERT_TRUE(event.isOk()) << event.status().toString();
  Result<bool> done = device_->queryEvent(*event);
  ASSERT_TRUE(done.isOk());
  EXPECT_TRUE(*done);
  EXPECT_TRUE(device_->synchronize(*stream).isOk());
  EXPECT_EQ(allocation[999], 0x7E);

  EXPECT_EQ(device_->copyAsync(*stream, static_cast<uint8_t*>(*pinned) + 1, *pinned, 10).code(),
            Code::InvalidArgument);
  EXPECT_TRUE(device_->copyAsync(*stream, *pinned, *pinned, 10).isOk());  // dst == src: no-op
  EXPECT_EQ(device_->copyAsync(*stream + 100, imported->ptr, *pinned, 10).code(), Code::NotFound);

  EXPECT_TRUE(device_->releaseEvent(*event).isOk());
  EXPECT_EQ(device_->queryEvent(*event).status().code(), Code::NotFound);
  // A released event is reused, not leaked.
  Result<EventId> again = device_->recordEvent(*stream);
  ASSERT_TRUE(again.isOk());
  EXPECT_NE(*again, *event);
  EXPECT_TRUE(device_->releaseEvent(*again).isOk());

  EXPECT_TRUE(device_->destroyStream(*stream).isOk());
  EXPECT_EQ(device_->destroyStream(*stream).code(), Code::NotFound);
  EXPECT_TRUE(device_->freePinned(*pinned).isOk());
  EXPECT_EQ(device_->freePinned(*pinned).code(), Code::NotFound);
  EXPECT_EQ(device_->allocPinned(0).status().code(), Code::InvalidArgument);
  ImportedBuffer buffer = *imported;
  EXPECT_TRUE(device_->releaseBuffer(buffer).isOk());
}

// Scratch for reductions across GPUs: cuMemAlloc under the device's context, freed once, and a
// copy from it reaches any memory (unified addressing: peerCopy).
TEST_F(CudaDeviceTest, DeviceMemoryIsAllocatedInItsContextAndFreedOnce) {
  EXPECT_TRUE(device_->capabilities().peerCopy);
  EXPECT_EQ(device_->allocDevice(0).status().code(), Code::InvalidArgument);
  const int before = fake_.liveObjects();
  Result<void*> memory = device_->allocDevice(1000);
  ASSERT_TRUE(memory.isOk()) << memory.status().toString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*memory) % 256, 0u);
  EXPECT_EQ(fake_.liveObjects(), before + 1);
  Result<StreamId> stream = device_->createStream();
  ASSERT_TRUE(stream.isOk());
  std::vector<uint8_t> in(1000, 0x5a), out(1000, 0);
  ASSERT_TRUE(device_->copyAsync(*stream, *memory, in.data(), in.size()).isOk());
  ASSERT_TRUE(device_->copyAsync(*stream, out.data(), *memory, out.size()).isOk());
  ASSERT_TRUE(device_->synchronize(*stream).isOk());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(device_->destroyStream(*stream).isOk());
  EXPECT_TRUE(device_->freeDevice(*memory).isOk());
  EXPECT_EQ(fake_.liveObjects(), before);
  EXPECT_EQ(device_->freeDevice(*memory).code(), Code::NotFound);
  EXPECT_EQ(device_->freeDevice(in.data()).code(), Code::NotFound);
}

TEST_F(CudaDeviceTest, DestructionReclaimsWhatCallersLeftBehind) {
  std::vector<uint8_t> allocation(256);
  ASSERT_TRUE(device_->importBuffer(legacyHandle(allocation.data(), 256, 256)).isOk());
  ASSERT_TRUE(device_->allocPinned(4096).isOk());
  ASSERT_TRUE(device_->allocDevice(4096).isOk());
  Result<StreamId> stream = device_->createStream();
  ASSERT_TRUE(stream.isOk());
  ASSERT_TRUE(device_->recordEvent(*stream).isOk());
  EXPECT_GT(fake_.liveObjects(), 0);
  // TearDown destroys the device and checks that the fake holds nothing.
}

}  // namespace
}  // namespace hc::device
