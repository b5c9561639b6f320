// SimDevice imports: sim handles only, in this process and from another process (the memfd over
// SCM_RIGHTS), and the bounds a copy into or out of device memory must respect.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "common/seqpacket.h"
#include "common/simdev/sim_allocation.h"
#include "daemon/device/host/host_device.h"
#include "daemon/device/sim/sim_device.h"

namespace hc::device {
namespace {

BufferHandle simHandle(const simdev::SimAllocation& allocation) {
  BufferHandle handle;
  handle.type = MemoryType::Sim;
  handle.bytes = {1, 0, 0, 0, 0, 0, 0, 0};  // the client's allocation id; opaque to the device
  handle.fd = allocation.fd();
  handle.size = allocation.bytes();
  return handle;
}

bool mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

class SimDeviceImportTest : public ::testing::Test {
 protected:
  void SetUp() override { stream_ = *device_.createStream(); }
  void TearDown() override { EXPECT_TRUE(device_.destroyStream(stream_).isOk()); }

  SimDevice device_{Vendor::Amd, 1, {}, {}, nullptr};
  StreamId stream_ = 0;
};

TEST_F(SimDeviceImportTest, ImportsAnAllocationOfThisProcess) {
  auto allocation = simdev::SimAllocation::create(8192, "import");
  ASSERT_TRUE(allocation.isOk());
  Result<ImportedBuffer> imported = device_.importBuffer(simHandle(*allocation));
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  EXPECT_NE(imported->ptr, nullptr);
  EXPECT_NE(imported->ptr, allocation->data()) << "the device maps its own view";
  EXPECT_EQ(imported->size, 8192u);
  EXPECT_NE(imported->id, 0u);

  std::vector<uint8_t> host(8192);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i % 251);
  ASSERT_TRUE(device_.copyAsync(stream_, imported->ptr, host.data(), host.size()).isOk());
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(std::memcmp(allocation->data(), host.data(), host.size()), 0)
      << "a copy into the import lands in the client's allocation";

  Result<ImportedBuffer> second = device_.importBuffer(simHandle(*allocation));
  ASSERT_TRUE(second.isOk());
  EXPECT_NE(second->id, imported->id);
  ImportedBuffer copy = *imported;
  ASSERT_TRUE(device_.releaseBuffer(*imported).isOk());
  EXPECT_EQ(imported->id, 0u);
  EXPECT_EQ(imported->ptr, nullptr);
  EXPECT_EQ(device_.releaseBuffer(copy).code(), Code::NotFound);
  EXPECT_TRUE(device_.releaseBuffer(*second).isOk());
}

TEST_F(SimDeviceImportTest, ImportRejectsOtherHandlesWithAClearError) {
  uint8_t memory[16];
  for (MemoryType type : {MemoryType::Host, MemoryType::Cuda, MemoryType::Hip}) {
    BufferHandle handle = hostBufferHandle(memory, sizeof(memory));
    handle.type = type;
    Result<ImportedBuffer> imported = device_.importBuffer(handle);
    ASSERT_FALSE(imported.isOk());
    EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
    EXPECT_TRUE(mentions(imported.status(), memoryTypeName(type))) << imported.status().message();
    EXPECT_TRUE(mentions(imported.status(), "sim handles only")) << imported.status().message();
  }
  auto allocation = simdev::SimAllocation::create(4096, "reject");
  ASSERT_TRUE(allocation.isOk());
  BufferHandle noFd = simHandle(*allocation);
  noFd.fd = -1;
  EXPECT_EQ(device_.importBuffer(noFd).status().code(), Code::InvalidArgument);
  BufferHandle noSize = simHandle(*allocation);
  noSize.size = 0;
  EXPECT_EQ(device_.importBuffer(noSize).status().code(), Code::InvalidArgument);
  BufferHandle wrongSize = simHandle(*allocation);
  wrongSize.size = 8192;
  Result<ImportedBuffer> mismatch = device_.importBuffer(wrongSize);
  ASSERT_FALSE(mismatch.isOk());
  EXPECT_EQ(mismatch.status().code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(mismatch.status(), "4096")) << mismatch.status().message();

  BufferHandle unsealed = simHandle(*allocation);
  UniqueFd raw(::memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(raw.get(), 4096), 0);
  unsealed.fd = raw.get();
  Result<ImportedBuffer> refused = device_.importBuffer(unsealed);
  ASSERT_FALSE(refused.isOk());
  EXPECT_TRUE(mentions(refused.status(), "SHRINK and GROW")) << refused.status().message();
}

// A client process allocates and fills; the device imports its memfd, reads the client's bytes
// and writes an answer the client then checks in its own mapping.
TEST_F(SimDeviceImportTest, ImportsAnAllocationOfAnotherProcess) {
  constexpr uint64_t kBytes = 1 << 20;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(sv[0]);
    auto a = simdev::SimAllocation::create(kBytes, "client");
    if (!a.isOk()) ::_exit(2);
    for (uint64_t i = 0; i < kBytes; ++i) a->data()[i] = static_cast<uint8_t>(i % 253);
    const std::array<uint8_t, 1> frame = {1};
    const int fds[] = {a->fd()};
    if (!sendMessage(sv[1], frame, fds).isOk()) ::_exit(3);
    if (!receiveMessage(sv[1], 16, /*block=*/true).isOk()) ::_exit(4);
    // The device wrote the first half's bytes over the second half.
    for (uint64_t i = 0; i < kBytes / 2; ++i) {
      if (a->data()[kBytes / 2 + i] != static_cast<uint8_t>(i % 253)) ::_exit(5);
    }
    ::_exit(0);
  }
  ::close(sv[1]);
  auto message = receiveMessage(sv[0], 16, /*block=*/true);
  ASSERT_TRUE(message.isOk()) << message.status().toString();
  ASSERT_EQ(message->fds.size(), 1u);
  BufferHandle handle;
  handle.type = MemoryType::Sim;
  handle.fd = message->fds[0].get();
  handle.size = kBytes;
  Result<ImportedBuffer> imported = device_.importBuffer(handle);
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  message->fds.clear();  // the device keeps its own duplicate

  std::vector<uint8_t> host(kBytes, 0);
  auto* device = static_cast<uint8_t*>(imported->ptr);
  ASSERT_TRUE(device_.copyAsync(stream_, host.data(), device, kBytes).isOk());
  ASSERT_TRUE(device_.copyAsync(stream_, device + kBytes / 2, device, kBytes / 2).isOk());
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  for (uint64_t i = 0; i < kBytes; ++i) ASSERT_EQ(host[i], static_cast<uint8_t>(i % 253)) << i;
  const std::array<uint8_t, 1> go = {1};
  ASSERT_TRUE(sendMessage(sv[0], go).isOk());
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus)) << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "the client saw the device's write";
  EXPECT_TRUE(device_.releaseBuffer(*imported).isOk());
  ::close(sv[0]);
}

TEST_F(SimDeviceImportTest, CopiesMustStayInsideAnImport) {
  auto allocation = simdev::SimAllocation::create(4096, "bounds");
  ASSERT_TRUE(allocation.isOk());
  Result<ImportedBuffer> imported = device_.importBuffer(simHandle(*allocation));
  ASSERT_TRUE(imported.isOk());
  auto* dev = static_cast<uint8_t*>(imported->ptr);
  std::vector<uint8_t> host(8192, 1);
  EXPECT_TRUE(device_.copyAsync(stream_, dev, host.data(), 4096).isOk()) << "exactly all of it";
  EXPECT_TRUE(device_.copyAsync(stream_, host.data(), dev + 4000, 96).isOk()) << "up to its end";
  Status past = device_.copyAsync(stream_, host.data(), dev, 4097);
  EXPECT_EQ(past.code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(past, "runs past the end of sim import")) << past.message();
  EXPECT_TRUE(mentions(past, "copy source")) << past.message();
  Status tail = device_.copyAsync(stream_, dev + 4000, host.data(), 100);
  EXPECT_EQ(tail.code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(tail, "copy destination")) << tail.message();
  EXPECT_TRUE(mentions(tail, "offset 4000")) << tail.message();
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(device_.copiesEnqueued(), 2u) << "refused copies are not enqueued";

  Result<void*> pinned = device_.allocPinned(4096);
  ASSERT_TRUE(pinned.isOk());
  EXPECT_EQ(device_.copyAsync(stream_, host.data(), *pinned, 4097).code(), Code::InvalidArgument)
      << "pinned allocations are bounded as well";
  EXPECT_TRUE(device_.freePinned(*pinned).isOk());

  ASSERT_TRUE(device_.releaseBuffer(*imported).isOk());
}

TEST_F(SimDeviceImportTest, ReduceBuffersMustStayInsideAnImport) {
  auto allocation = simdev::SimAllocation::create(4096, "reduce-bounds");
  ASSERT_TRUE(allocation.isOk());
  SimDevice device(Vendor::Nvidia, 0, {}, {}, [](const ReduceWork&, size_t, size_t) {});
  StreamId stream = *device.createStream();
  Result<ImportedBuffer> imported = device.importBuffer(simHandle(*allocation));
  ASSERT_TRUE(imported.isOk());
  std::vector<int32_t> host(2048);
  const void* inputs[] = {host.data(), imported->ptr};
  void* outputs[] = {host.data()};
  EXPECT_TRUE(
      device.reduceAsync(stream, ReduceWork{Dtype::Int32, RedOp::Sum, inputs, outputs, {}, 2, 1024})
          .isOk());
  Status s = device.reduceAsync(stream,
                                ReduceWork{Dtype::Int32, RedOp::Sum, inputs, outputs, {}, 2, 1025});
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(s, "reduce input")) << s.message();
  EXPECT_TRUE(device.synchronize(stream).isOk());
  EXPECT_TRUE(device.destroyStream(stream).isOk());
  EXPECT_TRUE(device.releaseBuffer(*imported).isOk());
}

}  // namespace
}  // namespace hc::device
