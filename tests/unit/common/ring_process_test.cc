// The rings and their wake-up handshakes across two real processes sharing a MAP_SHARED mapping,
// as the client and the daemon do: a lost wake-up shows as a sleeper that times out while entries
// wait, a wrong fence as reordered or missing entries.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <new>

#include "common/ipc/ring.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::ipc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kEntries = 64;  // small, so the producer also meets a full ring
constexpr uint64_t kTotal = 200'000;
// A consumer woken in time never reaches this: a sleep that times out with entries waiting is
// a lost wake-up.
constexpr int kSleepTimeoutMs = 500;
constexpr auto kDeadline = std::chrono::seconds(60);

// Counters the child reports through, placed in the heap part of the segment.
struct Tally {
  std::atomic<uint64_t> consumed;
  std::atomic<uint64_t> sleeps;
  std::atomic<uint64_t> lostWakeups;
  std::atomic<uint64_t> misordered;
};

// A segment in an anonymous MAP_SHARED mapping, as the daemon's memfd would be. The ring counters
// start just below 2^32, so every run crosses the wrap-around.
class SharedSegment {
 public:
  SharedSegment()
      : tallyOffset_(segmentLayout(0, kEntries).heapOffset), bytes_(tallyOffset_ + 4096) {
    base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    HC_CHECK(base_ != MAP_FAILED);
    auto* h = new (base_) SegmentHeader{};
    h->magic = kSegmentMagic;
    h->ringEntries = kEntries;
    for (auto* c : {&h->submitHead, &h->submitTail, &h->completionHead, &h->completionTail}) {
      c->store(UINT32_MAX - kTotal / 2);
    }
    new (static_cast<uint8_t*>(base_) + tallyOffset_) Tally{};
    view_ = SegmentView::over(base_, bytes_, kEntries);
  }
  ~SharedSegment() { ::munmap(base_, bytes_); }

  SegmentHeader* header() { return view_.header; }
  SegmentView& view() { return view_; }
  Tally& tally() { return *reinterpret_cast<Tally*>(view_.base + tallyOffset_); }

 private:
  const uint64_t tallyOffset_;
  const uint64_t bytes_;
  void* base_ = nullptr;
  SegmentView view_;
};

// Runs body in a child process, which exits with body's return value; a stuck child is killed.
template <typename Body>
pid_t forkChild(Body body) {
  pid_t pid = ::fork();
  HC_CHECK(pid >= 0);
  if (pid == 0) {
    ::alarm(std::chrono::duration_cast<std::chrono::seconds>(kDeadline).count() + 10);
    ::_exit(body());
  }
  return pid;
}

// The child's exit code, or -1 (after killing it) when it outlives the deadline.
int reap(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(1000);
  }
}

// Producer pacing: bursts of varying length. After every other burst the producer waits until
// the consumer has drained the ring, so the consumer runs dry and heads for sleep just as the
// next burst arrives: that is where a lost wake-up happens. A lost wake-up then stalls both sides
// until the consumer's sleep times out, and the consumer counts it.
struct Pacer {
  uint64_t n = 0;       // entries produced
  uint64_t bursts = 0;  // bursts finished
  int burst() const { return 1 + static_cast<int>(n * 2654435761u % 23); }
  // False when the ring was not drained by the deadline.
  template <typename Drained>
  bool endBurst(Drained drained, Clock::time_point deadline) {
    ++bursts;
    if (bursts % 2 == 0) {
      while (!drained()) {
        if (Clock::now() > deadline) return false;
        ::sched_yield();
      }
    }
    if (bursts % 64 == 0) ::usleep(100);  // now and then a real pause
    return true;
  }
};

TEST(RingProcessTest, SubmissionsWakeASleepingDaemonThroughTheEventfd) {
  SharedSegment seg;
  UniqueFd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  ASSERT_TRUE(efd.valid());
  SegmentHeader* h = seg.header();

  pid_t child = forkChild([&] {  // the client: produces submissions
    Pacer pacer;
    auto deadline = Clock::now() + kDeadline;
    auto drained = [&] { return seg.view().submit.empty(); };
    while (pacer.n < kTotal) {
      int burst = pacer.burst();
      for (int i = 0; i < burst && pacer.n < kTotal; ++i) {
        SubmitEntry e{};
        e.requestId = pacer.n;
        e.count = ~pacer.n;
        while (!seg.view().submit.push(e)) {
          // Full: the daemon must be awake to drain it, so ring before waiting for room.
          wakeDaemonIfSleeping(h, efd.get());
          ::sched_yield();
        }
        ++pacer.n;
      }
      wakeDaemonIfSleeping(h, efd.get());
      if (!pacer.endBurst(drained, deadline)) return 4;
    }
    return 0;
  });

  // The daemon: consumes, and sleeps on the eventfd with the handshake of protocol.h.
  auto deadline = Clock::now() + kDeadline;
  uint64_t expected = 0, sleeps = 0, lost = 0;
  bool misordered = false, corrupt = false;
  int idle = 0;
  while (expected < kTotal && Clock::now() < deadline) {
    SubmitEntry e;
    PopResult r = seg.view().submit.pop(&e);
    if (r == PopResult::Ok) {
      if (e.requestId != expected || e.count != ~expected) {
        misordered = true;
        break;
      }
      ++expected;
      idle = 0;
      continue;
    }
    if (r == PopResult::Corrupt) {
      corrupt = true;
      break;
    }
    if (++idle < 64) continue;  // spin briefly after activity, then sleep
    h->daemonSleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with wakeDaemonIfSleeping
    if (seg.view().submit.empty()) {
      pollfd p{efd.get(), POLLIN, 0};
      int n = ::poll(&p, 1, kSleepTimeoutMs);
      ++sleeps;
      if (n == 0 && !seg.view().submit.empty()) ++lost;
      uint64_t drained;
      [[maybe_unused]] ssize_t rd = ::read(efd.get(), &drained, sizeof(drained));
    }
    h->daemonSleeping.store(0, std::memory_order_relaxed);
    idle = 0;
  }
  int code = reap(child, deadline + std::chrono::seconds(5));
  EXPECT_EQ(code, 0) << "producer exit status (4: the ring was never drained)";
  EXPECT_FALSE(misordered) << "entry " << expected << " out of order";
  EXPECT_FALSE(corrupt);
  EXPECT_EQ(expected, kTotal);
  EXPECT_EQ(lost, 0u) << "the daemon slept through " << lost << " submissions";
  EXPECT_GT(sleeps, 0u) << "the sleep path was never taken";
  RecordProperty("daemon_sleeps", static_cast<int>(sleeps));
}

TEST(RingProcessTest, CompletionsWakeSleepingClientsThroughTheFutex) {
  SharedSegment seg;
  SegmentHeader* h = seg.header();
  Tally& tally = seg.tally();

  pid_t child = forkChild([&] {  // the client: consumes completions, sleeps on the futex word
    uint64_t expected = 0;
    int idle = 0;
    auto& ring = seg.view().completion;
    while (expected < kTotal) {
      CompletionEntry c;
      PopResult r = ring.pop(&c);
      if (r == PopResult::Ok) {
        if (c.requestId != expected || c.value != expected * 3) {
          tally.misordered.store(1);
          return 2;
        }
        tally.consumed.store(++expected, std::memory_order_relaxed);
        idle = 0;
        continue;
      }
      if (r == PopResult::Corrupt) return 3;
      if (++idle < 64) continue;
      // Read the word before announcing the sleep: a completion pushed after the recheck below
      // bumps it, so the wait returns at once instead of missing the wake.
      uint32_t seen = h->completionFutex.load(std::memory_order_acquire);
      h->clientSleepers.fetch_add(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with wakeClientIfSleeping
      if (ring.empty()) {
        bool woken = futexWait(&h->completionFutex, seen, int64_t{kSleepTimeoutMs} * 1'000'000);
        tally.sleeps.fetch_add(1, std::memory_order_relaxed);
        if (!woken && !ring.empty()) tally.lostWakeups.fetch_add(1);
      }
      h->clientSleepers.fetch_sub(1, std::memory_order_relaxed);
      idle = 0;
    }
    return 0;
  });

  // The daemon: produces completions, waking the client only when it sleeps.
  auto deadline = Clock::now() + kDeadline;
  Pacer pacer;
  bool timedOut = false;
  auto drained = [&] { return seg.view().completion.empty(); };
  while (pacer.n < kTotal && !timedOut) {
    int burst = pacer.burst();
    for (int i = 0; i < burst && pacer.n < kTotal; ++i) {
      CompletionEntry c{};
      c.requestId = pacer.n;
      c.value = pacer.n * 3;
      while (!seg.view().completion.push(c)) {
        wakeClientIfSleeping(h);
        ::sched_yield();
        if (Clock::now() > deadline) {
          timedOut = true;
          break;
        }
      }
      if (timedOut) break;
      ++pacer.n;
    }
    wakeClientIfSleeping(h);
    if (!pacer.endBurst(drained, deadline)) timedOut = true;
  }
  int code = reap(child, deadline + std::chrono::seconds(5));
  EXPECT_FALSE(timedOut) << "the client stopped consuming";
  EXPECT_EQ(code, 0) << "consumer exit status (2: misordered, 3: corrupt, 142: hung)";
  EXPECT_EQ(tally.misordered.load(), 0u);
  EXPECT_EQ(tally.consumed.load(), kTotal);
  EXPECT_EQ(tally.lostWakeups.load(), 0u) << "the client slept through completions";
  EXPECT_GT(tally.sleeps.load(), 0u) << "the sleep path was never taken";
  EXPECT_EQ(h->clientSleepers.load(), 0u);
  RecordProperty("client_sleeps", static_cast<int>(tally.sleeps.load()));
}

TEST(RingProcessTest, FutexWakeReachesAnotherProcess) {
  SharedSegment seg;
  SegmentHeader* h = seg.header();
  pid_t child = forkChild([&] {
    uint32_t seen = h->completionFutex.load(std::memory_order_acquire);
    h->clientSleepers.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Woken by the parent well before the 10 s timeout, or this process reports failure.
    bool woken = futexWait(&h->completionFutex, seen, 10'000'000'000);
    while (woken && h->completionFutex.load() == seen) {
      woken = futexWait(&h->completionFutex, seen, 10'000'000'000);  // spurious: wait again
    }
    h->clientSleepers.fetch_sub(1, std::memory_order_relaxed);
    return woken ? 0 : 1;
  });
  // Wake only once the child sleeps, so the wake (not an early return) is what is tested.
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (h->clientSleepers.load() == 0 && Clock::now() < deadline) ::usleep(100);
  ::usleep(20'000);
  auto t0 = Clock::now();
  wakeClientIfSleeping(h);
  EXPECT_EQ(reap(child, deadline + std::chrono::seconds(5)), 0) << "the sleeper was not woken";
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(RingProcessTest, FutexWaitTimesOutAcrossProcesses) {
  SharedSegment seg;
  SegmentHeader* h = seg.header();
  pid_t child = forkChild([&] {
    auto t0 = Clock::now();
    bool woken = futexWait(&h->completionFutex, h->completionFutex.load(), 30'000'000);
    bool waited = Clock::now() - t0 >= std::chrono::milliseconds(25);
    return !woken && waited ? 0 : 1;
  });
  EXPECT_EQ(reap(child, Clock::now() + std::chrono::seconds(10)), 0)
      << "futexWait should return false after its timeout";
}

}  // namespace
}  // namespace hc::ipc
