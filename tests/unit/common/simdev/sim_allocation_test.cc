// SimAllocation: create, import in this process and in another one (the fd passed over
// SCM_RIGHTS), and every refusal of import.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/seqpacket.h"
#include "common/simdev/sim_allocation.h"

namespace hc::simdev {
namespace {

bool mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// A memfd of `bytes` bytes with exactly `seals` added (none when 0).
UniqueFd makeMemfd(uint64_t bytes, unsigned flags, int seals) {
  UniqueFd fd(::memfd_create("simdev-test", flags));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
  if (seals != 0) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

uint8_t patternByte(size_t i) { return static_cast<uint8_t>((i * 131 + 7) & 0xff); }

TEST(SimAllocationTest, CreateGivesZeroedWritableSealedMemory) {
  auto a = SimAllocation::create(3 * 4096 + 5, "create-test");
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  ASSERT_NE(a->data(), nullptr);
  EXPECT_EQ(a->bytes(), 3u * 4096 + 5);
  EXPECT_GE(a->fd(), 0);
  for (uint64_t i = 0; i < a->bytes(); ++i) ASSERT_EQ(a->data()[i], 0) << i;
  a->data()[a->bytes() - 1] = 0x5a;
  EXPECT_EQ(a->data()[a->bytes() - 1], 0x5a);
  const int seals = ::fcntl(a->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(::ftruncate(a->fd(), 4096), 0) << "the shrink seal must hold";
  EXPECT_EQ(::fcntl(a->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

TEST(SimAllocationTest, CreateRefusesZeroBytes) {
  auto a = SimAllocation::create(0, "zero");
  ASSERT_FALSE(a.isOk());
  EXPECT_EQ(a.status().code(), Code::InvalidArgument);
}

TEST(SimAllocationTest, ImportInProcessSharesBytesAndOwnsItsFd) {
  auto a = SimAllocation::create(8192, "share");
  ASSERT_TRUE(a.isOk());
  int exported = ::dup(a->fd());
  auto b = SimAllocation::import(exported, 8192);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_NE(b->fd(), exported) << "import must duplicate the fd";
  ::close(exported);  // the caller's copy goes; the import keeps working
  EXPECT_NE(b->data(), a->data()) << "a second mapping of the same memory";
  a->data()[100] = 42;
  EXPECT_EQ(b->data()[100], 42);
  b->data()[8191] = 9;
  EXPECT_EQ(a->data()[8191], 9);
}

TEST(SimAllocationTest, MoveTransfersOwnership) {
  auto a = SimAllocation::create(4096, "move");
  ASSERT_TRUE(a.isOk());
  uint8_t* data = a->data();
  SimAllocation moved(std::move(*a));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(a->data(), nullptr);
  EXPECT_EQ(a->fd(), -1);
  SimAllocation assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), data);
  EXPECT_EQ(assigned.bytes(), 4096u);
  assigned.data()[0] = 1;  // still mapped
}

// The child creates an allocation, fills it, passes the fd over a socket and exits; the parent
// imports it and sees the child's bytes, which outlive the child as GPU memory outlives a
// cudaIpc exporter only while referenced.
TEST(SimAllocationTest, ImportAcrossProcessesSeesTheExportersBytes) {
  constexpr uint64_t kBytes = 64 * 1024 + 3;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(sv[0]);
    auto a = SimAllocation::create(kBytes, "child");
    if (!a.isOk()) ::_exit(2);
    for (uint64_t i = 0; i < kBytes; ++i) a->data()[i] = patternByte(i);
    const std::array<uint8_t, 1> frame = {1};
    const int fds[] = {a->fd()};
    if (!sendMessage(sv[1], frame, fds).isOk()) ::_exit(3);
    // Wait for the parent's word that it has imported, then write once more through our mapping.
    auto reply = receiveMessage(sv[1], 16, /*block=*/true);
    if (!reply.isOk()) ::_exit(4);
    a->data()[0] = 0xee;
    const std::array<uint8_t, 1> done = {2};
    if (!sendMessage(sv[1], done).isOk()) ::_exit(5);
    ::_exit(0);
  }
  ::close(sv[1]);
  auto message = receiveMessage(sv[0], 16, /*block=*/true);
  ASSERT_TRUE(message.isOk()) << message.status().toString();
  ASSERT_EQ(message->fds.size(), 1u);
  auto imported = SimAllocation::import(message->fds[0].get(), kBytes);
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  for (uint64_t i = 0; i < kBytes; ++i) ASSERT_EQ(imported->data()[i], patternByte(i)) << i;
  const std::array<uint8_t, 1> go = {1};
  ASSERT_TRUE(sendMessage(sv[0], go).isOk());
  ASSERT_TRUE(receiveMessage(sv[0], 16, /*block=*/true).isOk());
  EXPECT_EQ(imported->data()[0], 0xee) << "a store in the exporter shows in the importer";
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  EXPECT_EQ(imported->data()[1], patternByte(1)) << "still mapped after the exporter exited";
  ::close(sv[0]);
}

TEST(SimAllocationTest, ImportRefusesAMemfdWithoutSeals) {
  UniqueFd sealable = makeMemfd(4096, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0);
  auto a = SimAllocation::import(sealable.get(), 4096);
  ASSERT_FALSE(a.isOk());
  EXPECT_EQ(a.status().code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(a.status(), "SHRINK and GROW")) << a.status().message();

  UniqueFd plain = makeMemfd(4096, MFD_CLOEXEC, 0);  // never sealable
  auto b = SimAllocation::import(plain.get(), 4096);
  ASSERT_FALSE(b.isOk());
  EXPECT_TRUE(mentions(b.status(), "SHRINK and GROW")) << b.status().message();
}

TEST(SimAllocationTest, ImportRefusesAMemfdWithOnlyOneOfTheSeals) {
  UniqueFd shrinkOnly = makeMemfd(4096, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_SHRINK);
  auto a = SimAllocation::import(shrinkOnly.get(), 4096);
  ASSERT_FALSE(a.isOk());
  EXPECT_TRUE(mentions(a.status(), "SHRINK and GROW")) << a.status().message();
  UniqueFd growOnly = makeMemfd(4096, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_GROW);
  EXPECT_FALSE(SimAllocation::import(growOnly.get(), 4096).isOk());
  UniqueFd both = makeMemfd(4096, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_TRUE(SimAllocation::import(both.get(), 4096).isOk()) << "both seals are enough";
}

TEST(SimAllocationTest, ImportRefusesASizeMismatch) {
  auto a = SimAllocation::create(8192, "size");
  ASSERT_TRUE(a.isOk());
  for (uint64_t wrong : {uint64_t{4096}, uint64_t{8193}, uint64_t{1} << 40}) {
    auto b = SimAllocation::import(a->fd(), wrong);
    ASSERT_FALSE(b.isOk()) << wrong;
    EXPECT_EQ(b.status().code(), Code::InvalidArgument);
    EXPECT_TRUE(mentions(b.status(), "holds 8192 bytes")) << b.status().message();
  }
}

TEST(SimAllocationTest, ImportRefusesWhatIsNotAMemfd) {
  int pipeFds[2];
  ASSERT_EQ(::pipe2(pipeFds, O_CLOEXEC), 0);
  auto a = SimAllocation::import(pipeFds[0], 4096);
  ASSERT_FALSE(a.isOk());
  EXPECT_EQ(a.status().code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(a.status(), "not a memfd")) << a.status().message();
  ::close(pipeFds[0]);
  ::close(pipeFds[1]);

  char path[] = "/tmp/simdev-regular-XXXXXX";
  UniqueFd file(::mkstemp(path));
  ASSERT_TRUE(file.valid());
  ::unlink(path);
  ASSERT_EQ(::ftruncate(file.get(), 4096), 0);
  auto b = SimAllocation::import(file.get(), 4096);
  ASSERT_FALSE(b.isOk()) << "a regular file could be truncated under the mapping";
  EXPECT_EQ(b.status().code(), Code::InvalidArgument);

  EXPECT_EQ(SimAllocation::import(-1, 4096).status().code(), Code::InvalidArgument);
  EXPECT_EQ(SimAllocation::import(file.get(), 0).status().code(), Code::InvalidArgument);
}

TEST(SimAllocationTest, ImportRefusesAWriteSealedMemfd) {
  UniqueFd fd =
      makeMemfd(4096, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
  auto a = SimAllocation::import(fd.get(), 4096);
  ASSERT_FALSE(a.isOk());
  EXPECT_EQ(a.status().code(), Code::InvalidArgument);
  EXPECT_TRUE(mentions(a.status(), "writing")) << a.status().message();
}

}  // namespace
}  // namespace hc::simdev
