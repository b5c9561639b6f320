// ProcessMemory and StagedMatch against a real second process: a forked child that opens its own
// /proc/self/mem and hands it over a socket, as a client does with its CmaProbe; the test reads
// and writes the child's memory through it, as the daemon does with a client's.
#include "daemon/session/process_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/seqpacket.h"
#include "daemon/session/client_staging.h"

namespace hc::session {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr uint8_t kExec = 'x';  // the command that makes the child exec kExecProgram
constexpr const char* kExecProgram = "/bin/sleep";

// A child that sends its /proc/self/mem, then waits for a command and keeps a shared-anonymous
// region alive until killed. The region is MAP_SHARED so the test can see what the daemon-side
// code wrote into the child.
class ChildProcess {
 public:
  ChildProcess() {
    // One page after the region unmapped, so "past the end" is unmapped for certain (PROT_NONE
    // would not do: a mem file reaches such pages, as a debugger does).
    region_ = static_cast<uint8_t*>(
        ::mmap(nullptr, kBytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ::munmap(region_ + kBytes, 4096);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(pair[0]);
      runChild(pair[1]);
    }
    ::close(pair[1]);
    control_.reset(pair[0]);
    auto msg = receiveMessage(control_.get(), 16, true);
    if (msg.isOk() && msg->fds.size() == 1) memFd_ = std::move(msg->fds[0]);
  }
  ~ChildProcess() {
    kill();
    ::munmap(region_, kBytes);
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Makes the child exec kExecProgram and returns once the exec has happened: the socket's
  // close-on-exec end closes in the exec, after the old address space was let go.
  bool execAndWait() {
    if (::write(control_.get(), &kExec, 1) != 1) return false;
    char c;
    return ::read(control_.get(), &c, 1) == 0;
  }
  pid_t pid() const { return pid_; }
  uint8_t* region() { return region_; }
  uint64_t address(size_t offset = 0) const { return reinterpret_cast<uint64_t>(region_ + offset); }
  // The child's /proc/self/mem, once.
  UniqueFd takeMemFd() { return std::move(memFd_); }

 private:
  [[noreturn]] static void runChild(int sock) {
    const int mem = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    const int fds[1] = {mem};
    const uint8_t hello = 1;
    if (mem < 0 || !sendMessage(sock, {&hello, 1}, fds).isOk()) ::_exit(2);
    ::close(mem);
    uint8_t command = 0;
    if (::read(sock, &command, 1) == 1 && command == kExec) {
      ::execl(kExecProgram, kExecProgram, "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (;;) ::pause();
  }

  pid_t pid_ = -1;
  uint8_t* region_ = nullptr;
  UniqueFd control_;
  UniqueFd memFd_;
};

std::vector<uint8_t> pattern() {
  std::vector<uint8_t> p(ipc::kCmaPatternBytes);
  std::iota(p.begin(), p.end(), uint8_t{7});
  return p;
}

// The child with the pattern in place, attached.
std::shared_ptr<const ProcessMemory> attached(ChildProcess& child) {
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.takeMemFd(), child.pid(), child.address(), p);
  EXPECT_TRUE(pm.isOk()) << pm.status().toString();
  if (!pm.isOk()) return nullptr;
  return std::move(pm.value());
}

// The start of the first mapping in /proc/<pid>/maps: the program's own first page.
uint64_t firstMapping(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  if (!std::getline(maps, line)) return 0;
  return std::strtoull(line.c_str(), nullptr, 16);
}

TEST(ProcessMemoryTest, ProbeReadsThePatternAndWritesItsComplement) {
  ChildProcess child;
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.takeMemFd(), child.pid(), child.address(), p);
  ASSERT_TRUE(pm.isOk()) << pm.status().toString();
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(child.region()[i], uint8_t(~p[i])) << i;
}

TEST(ProcessMemoryTest, ProbeWithTheWrongPatternIsRefused) {
  ChildProcess child;
  auto p = pattern();
  // The region holds zeros.
  auto pm = ProcessMemory::attach(child.takeMemFd(), child.pid(), child.address(), p);
  ASSERT_FALSE(pm.isOk());
  EXPECT_EQ(pm.status().code(), Code::InvalidArgument);
  EXPECT_NE(pm.status().message().find("differs"), std::string::npos) << pm.status().message();
}

TEST(ProcessMemoryTest, UnmappedRangeIsInvalidArgumentAndExitedProcessIsUnavailable) {
  ChildProcess child;
  auto pm = attached(child);
  ASSERT_NE(pm, nullptr);
  std::vector<uint8_t> buf(8192);
  Status s = pm->read(child.address(kBytes - 4096), buf.data(), buf.size());
  EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("not mapped"), std::string::npos) << s.message();
  s = pm->read(~uint64_t{0} - 100, buf.data(), 16);
  EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
  child.kill();
  s = pm->read(child.address(), buf.data(), 16);
  EXPECT_EQ(s.code(), Code::Unavailable) << s.toString();
  EXPECT_NE(s.message().find("exited or called exec"), std::string::npos) << s.message();
}

// The case: the client execs (a setuid program, say) and the pid lives on with another
// program in it. The descriptor reaches the old address space only, so the new image is neither
// read nor written, even at an address the new image has mapped.
TEST(ProcessMemoryTest, ExecLeavesNothingToReadOrWrite) {
  ChildProcess child;
  auto pm = attached(child);
  ASSERT_NE(pm, nullptr);
  ASSERT_TRUE(child.execAndWait());
  ASSERT_EQ(::kill(child.pid(), 0), 0) << "the pid must still name a live process";
  const uint64_t image = firstMapping(child.pid());
  ASSERT_NE(image, 0u);
  std::vector<uint8_t> buf(64, 0xEE);
  for (uint64_t address : {image, child.address()}) {
    Status s = pm->read(address, buf.data(), buf.size());
    EXPECT_EQ(s.code(), Code::Unavailable) << s.toString();
    EXPECT_NE(s.message().find("exited or called exec"), std::string::npos) << s.message();
    for (uint8_t b : buf) ASSERT_EQ(b, 0xEE) << "nothing may be read";
    s = pm->write(address, buf.data(), buf.size());
    EXPECT_EQ(s.code(), Code::Unavailable) << s.toString();
  }
  EXPECT_EQ(::kill(child.pid(), 0), 0) << "the new program runs on, untouched";
  // The path this replaced, for contrast: by pid, the new image's first page is right there.
  char elf[4] = {};
  iovec mine{elf, sizeof(elf)};
  iovec theirs{reinterpret_cast<void*>(image), sizeof(elf)};
  if (::process_vm_readv(child.pid(), &mine, 1, &theirs, 1, 0) == sizeof(elf)) {
    EXPECT_EQ(std::memcmp(elf, "\177ELF", 4), 0);
  }
}

TEST(ProcessMemoryTest, OwnMemFileWorksWithoutAnyPtraceRights) {
  std::vector<uint8_t> mine(4096);
  auto p = pattern();
  std::memcpy(mine.data(), p.data(), p.size());
  UniqueFd mem(::open("/proc/self/mem", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(mem.valid());
  auto pm =
      ProcessMemory::attach(std::move(mem), ::getpid(), reinterpret_cast<uint64_t>(mine.data()), p);
  ASSERT_TRUE(pm.isOk()) << pm.status().toString();
  EXPECT_EQ(mine[0], uint8_t(~p[0]));
  const std::vector<uint8_t> src(3000, 0x5A);
  ASSERT_TRUE(
      (*pm)->write(reinterpret_cast<uint64_t>(mine.data() + 17), src.data(), src.size()).isOk());
  EXPECT_EQ(mine[17], 0x5A);
  EXPECT_EQ(mine[17 + 2999], 0x5A);
  EXPECT_EQ(mine[17 + 3000], 0);
}

// The daemon writes into whatever the client sent: only a mem file of /proc, open for reading
// and writing, is taken, even when the pattern would read back from the file.
TEST(ProcessMemoryTest, DescriptorsOtherThanAMemFileAreRefused) {
  auto p = pattern();
  std::vector<uint8_t> mine(p);
  const uint64_t address = reinterpret_cast<uint64_t>(mine.data());
  auto refused = [&](UniqueFd fd, const std::string& needle) {
    ASSERT_TRUE(fd.valid()) << needle;
    auto pm = ProcessMemory::attach(std::move(fd), ::getpid(), address, p);
    ASSERT_FALSE(pm.isOk()) << needle;
    EXPECT_EQ(pm.status().code(), Code::InvalidArgument) << pm.status().toString();
    EXPECT_NE(pm.status().message().find(needle), std::string::npos) << pm.status().message();
  };
  refused(UniqueFd(::open("/dev/null", O_RDWR | O_CLOEXEC)), "not a file of /proc");
  // A file holding the pattern where the address points: it would pass the read-back.
  UniqueFd file(::memfd_create("fake-mem", MFD_CLOEXEC));
  ASSERT_TRUE(file.valid());
  ASSERT_EQ(::pwrite(file.get(), p.data(), p.size(), static_cast<off_t>(address)),
            static_cast<ssize_t>(p.size()));
  refused(std::move(file), "not a file of /proc");
  refused(UniqueFd(::open("/proc/self/status", O_RDONLY | O_CLOEXEC)), "not a process's mem");
  refused(UniqueFd(::open("/proc/self/mem", O_RDONLY | O_CLOEXEC)), "reading and writing");
  EXPECT_EQ(mine, p) << "nothing was written through a refused descriptor";
}

TEST(StagedMatchTest, InPlaceOperandSharesOneCopyAndOnlyTheReceiveGoesBack) {
  ChildProcess child;
  auto shared = attached(child);
  ASSERT_NE(shared, nullptr);
  // Allgather in place for rank 1 of 2: send = recv + 1 block.
  const uint64_t block = 4096;
  for (size_t i = 0; i < 2 * block; ++i) child.region()[4096 + i] = static_cast<uint8_t>(i % 251);
  std::vector<PendingOp> ops(1);
  ops[0].processMemory = shared;
  ops[0].recvRange = {child.address(4096), 2 * block};
  ops[0].sendRange = {child.address(4096 + block), block};
  std::vector<coll::RankBuffers> bufs(1);
  staging::StagingPool pool;
  StagedMatch staged;
  ASSERT_TRUE(staged.stageIn(ops, bufs, &pool, nullptr).isOk());
  ASSERT_EQ(bufs[0].send, bufs[0].recv + block) << "the layout of the client is kept";
  for (size_t i = 0; i < block; ++i) ASSERT_EQ(bufs[0].send[i], (block + i) % 251);
  std::memset(bufs[0].recv, 0xAB, block);  // "rank 0's block arrives"
  ASSERT_TRUE(staged.stageOut(ops).isOk());
  for (size_t i = 0; i < block; ++i) ASSERT_EQ(child.region()[4096 + i], 0xAB) << i;
  for (size_t i = 0; i < block; ++i) ASSERT_EQ(child.region()[4096 + block + i], (block + i) % 251);
}

TEST(StagedMatchTest, SendOnlyCopyNeverLandsOnAnAdjacentReceiveRange) {
  ChildProcess child;
  auto pm = attached(child);
  ASSERT_NE(pm, nullptr);
  std::vector<PendingOp> ops(1);
  ops[0].processMemory = pm;
  ops[0].sendRange = {child.address(8192), 100};
  ops[0].recvRange = {child.address(8192 + 100), 100};
  std::memset(child.region() + 8192, 1, 200);
  std::vector<coll::RankBuffers> bufs(1);
  staging::StagingPool pool;
  StagedMatch staged;
  ASSERT_TRUE(staged.stageIn(ops, bufs, &pool, nullptr).isOk());
  ASSERT_NE(bufs[0].send + 100, bufs[0].recv) << "disjoint ranges get separate copies";
  std::memset(bufs[0].recv, 9, 100);
  std::memset(const_cast<uint8_t*>(bufs[0].send), 5, 100);  // the op may scribble on it
  ASSERT_TRUE(staged.stageOut(ops).isOk());
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(child.region()[8192 + i], 1) << "send untouched";
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(child.region()[8292 + i], 9) << "recv written";
}

}  // namespace
}  // namespace hc::session
