// ProcessMemory and StagedMatch against a real second process: a forked child whose memory the
// test reads and writes through the kernel, as the daemon does with a client's.
#include "daemon/session/process_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/session/client_staging.h"

namespace hc::session {
namespace {

constexpr size_t kBytes = 1 << 20;

// A child that keeps a shared-anonymous region alive until killed. The region is MAP_SHARED so
// the test can see what the daemon-side code wrote into the child.
class ChildProcess {
 public:
  ChildProcess() {
    // One guard page after the region, so "past the end" is unmapped for certain.
    region_ = static_cast<uint8_t*>(::mmap(nullptr, kBytes + 4096, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ::mprotect(region_ + kBytes, 4096, PROT_NONE);
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~ChildProcess() {
    kill();
    ::munmap(region_, kBytes + 4096);
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  uint8_t* region() { return region_; }
  uint64_t address(size_t offset = 0) const { return reinterpret_cast<uint64_t>(region_ + offset); }

 private:
  pid_t pid_ = -1;
  uint8_t* region_ = nullptr;
};

std::vector<uint8_t> pattern() {
  std::vector<uint8_t> p(ipc::kCmaPatternBytes);
  std::iota(p.begin(), p.end(), uint8_t{7});
  return p;
}

TEST(ProcessMemoryTest, ProbeReadsThePatternAndWritesItsComplement) {
  ChildProcess child;
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.pid(), child.address(), p);
  ASSERT_TRUE(pm.isOk()) << pm.status().toString();
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(child.region()[i], uint8_t(~p[i])) << i;
}

TEST(ProcessMemoryTest, ProbeWithTheWrongPatternIsRefused) {
  ChildProcess child;
  auto p = pattern();
  auto pm = ProcessMemory::attach(child.pid(), child.address(), p);  // region holds zeros
  ASSERT_FALSE(pm.isOk());
  EXPECT_NE(pm.status().message().find("differs"), std::string::npos) << pm.status().message();
}

TEST(ProcessMemoryTest, UnmappedRangeIsInvalidArgumentAndExitedProcessIsUnavailable) {
  ChildProcess child;
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.pid(), child.address(), p);
  ASSERT_TRUE(pm.isOk()) << pm.status().toString();
  std::vector<uint8_t> buf(8192);
  Status s = (*pm)->read(child.address(kBytes - 4096), buf.data(), buf.size());
  EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
  child.kill();
  s = (*pm)->read(child.address(), buf.data(), 16);
  EXPECT_EQ(s.code(), Code::Unavailable) << s.toString();
}

TEST(StagedMatchTest, InPlaceOperandSharesOneCopyAndOnlyTheReceiveGoesBack) {
  ChildProcess child;
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.pid(), child.address(), p);
  ASSERT_TRUE(pm.isOk());
  std::shared_ptr<const ProcessMemory> shared = std::move(pm.value());
  // Allgather in place for rank 1 of 2: send = recv + 1 block.
  const uint64_t block = 4096;
  for (size_t i = 0; i < 2 * block; ++i) child.region()[4096 + i] = static_cast<uint8_t>(i % 251);
  std::vector<PendingOp> ops(1);
  ops[0].processMemory = shared;
  ops[0].recvRange = {child.address(4096), 2 * block};
  ops[0].sendRange = {child.address(4096 + block), block};
  std::vector<coll::RankBuffers> bufs(1);
  StagingPool pool;
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
  auto p = pattern();
  std::memcpy(child.region(), p.data(), p.size());
  auto pm = ProcessMemory::attach(child.pid(), child.address(), p);
  ASSERT_TRUE(pm.isOk());
  std::vector<PendingOp> ops(1);
  ops[0].processMemory = std::move(pm.value());
  ops[0].sendRange = {child.address(8192), 100};
  ops[0].recvRange = {child.address(8192 + 100), 100};
  std::memset(child.region() + 8192, 1, 200);
  std::vector<coll::RankBuffers> bufs(1);
  StagingPool pool;
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
