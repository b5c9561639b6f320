// The shim adds no system call and no heap allocation per operation. Two ranks on one daemon hold
// two communicators of the same kind, one made with hc_comm_init_rank and one with
// ncclCommInitRank, and share host buffers from ncclMemAlloc. After a warm-up, rank 0 runs
// windows of allreduces, one operation at a time: through hc_allreduce + hc_wait, through
// ncclAllReduce with the NULL stream (the shim waits in hc_wait), and through a probe that calls
// hc like the first plus one getppid and one heap allocation per operation. Rank 0 is a fork of
// the test traced with ptrace: the test sees each of its system calls and reads, at that moment,
// which window it is in and whether it is inside an hc_* call (overhead_counters.h); heap calls are
// counted in the rank by interposed malloc and friends.
//
// libhcclient's own system calls per operation depend on timing (its waits spin with sched_yield,
// then sleep on a futex; the daemon may need waking or not), so their totals are printed, not
// asserted. What the shim does is not timing-dependent: the counts outside hc's calls (the shim's
// own code, or the loop) must be 0 per operation through NCCL as through hc, and the shim must
// call hc_allreduce and hc_wait once per operation, as the hc loop does; then its total is hc's by
// construction. Heap totals, which do not depend on timing, must also be equal. The probe window
// must show exactly 1 per operation outside hc's calls: it proves that the counters see what the
// assertions rely on.
//
// Then a window of ncclCommGetAsyncError alone, as a watchdog polls it: no heap call at all, and
// system calls only from the client's throttled hang-up check (one poll per 10 ms at most), far
// fewer than one per thousand calls. Its cost in time is bench/shim-overhead's
// (hc-async-error-cost).
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "hetero_comm/hc.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/shim/overhead_counters.h"

namespace hc::integ {
namespace {

using namespace overhead;

constexpr int kCount = 256;   // floats per allreduce: 1 KiB
constexpr int kWarmup = 200;  // per window kind, before anything is counted
constexpr int kOpsPerWindow = 300;
constexpr int kRounds = 3;  // each window kind kRounds times, in a rotating order
constexpr uint64_t kOps = uint64_t{kOpsPerWindow} * kRounds;  // per window kind
constexpr int kTraceRefused = 77;  // exit code of a rank that could not be traced
constexpr uint64_t kAsyncCalls = 200'000;

// What a rank sends back over its pipe when it ends.
struct RankResult {
  int ok = 0;
  char error[256] = {};
  Counts counts{};
};

struct Ids {
  hc_unique_id_t hc;
  ncclUniqueId nccl;
};

// One rank: both communicators, the shared buffers, the warm-up and the windows. Both ranks run
// it alike (the peer's counters just stay at zero); returns the result to report.
RankResult runRank(int rank, const Ids& ids, bool measured) {
  RankResult res;
  auto failed = [&](const char* what, int code) {
    std::snprintf(res.error, sizeof(res.error), "rank %d: %s failed (%d): %s", rank, what, code,
                  hc_get_last_error(nullptr));
    return res;
  };
  if (measured) measureThisThread();
  ncclComm_t nccl = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&nccl, 2, ids.nccl, rank); r != ncclSuccess) {
    return failed("ncclCommInitRank", r);
  }
  hc_comm_t comm = nullptr;
  if (hc_status_t s = hc_comm_init_rank(&comm, 2, ids.hc, rank); s != HC_OK) {
    return failed("hc_comm_init_rank", s);
  }
  float* send = nullptr;
  float* recv = nullptr;
  if (ncclMemAlloc(reinterpret_cast<void**>(&send), kCount * sizeof(float)) != ncclSuccess ||
      ncclMemAlloc(reinterpret_cast<void**>(&recv), kCount * sizeof(float)) != ncclSuccess) {
    return failed("ncclMemAlloc", 0);
  }
  for (int i = 0; i < kCount; ++i) send[i] = static_cast<float>(rank + 1);

  // Each loop stops at the first failure; nothing in them but the calls themselves.
  auto viaHc = [&](int n) {
    for (int i = 0; i < n; ++i) {
      hc_request_t req = nullptr;
      hc_status_t s = hc_allreduce(send, recv, kCount, HC_FLOAT32, HC_SUM, comm, nullptr, &req);
      if (s == HC_OK) s = hc_wait(&req);
      if (s != HC_OK) return static_cast<int>(s);
    }
    return 0;
  };
  auto viaNccl = [&](int n) {
    for (int i = 0; i < n; ++i) {
      ncclResult_t r = ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, nccl, nullptr);
      if (r != ncclSuccess) return static_cast<int>(r);
    }
    return 0;
  };
  // A layer that costs one system call and one allocation per operation outside hc's calls.
  auto viaProbe = [&](int n) {
    for (int i = 0; i < n; ++i) {
      (void)::syscall(SYS_getppid);
      auto* volatile extra = new int(i);
      delete extra;
      hc_request_t req = nullptr;
      hc_status_t s = hc_allreduce(send, recv, kCount, HC_FLOAT32, HC_SUM, comm, nullptr, &req);
      if (s == HC_OK) s = hc_wait(&req);
      if (s != HC_OK) return static_cast<int>(s);
    }
    return 0;
  };
  auto run = [&](Window w, int n) {
    return w == kHc ? viaHc(n) : w == kNccl ? viaNccl(n) : viaProbe(n);
  };
  static constexpr const char* kNames[] = {"", "hc window", "nccl window", "probe window"};

  for (Window w : {kHc, kNccl, kProbe}) {
    if (int rc = run(w, kWarmup); rc != 0) return failed(kNames[w], rc);
  }
  const Window order[] = {kHc, kNccl, kProbe};
  for (int round = 0; round < kRounds; ++round) {
    for (int k = 0; k < 3; ++k) {
      const Window w = order[(round + k) % 3];
      enterWindow(w);
      const int rc = run(w, kOpsPerWindow);
      leaveWindow();
      if (rc != 0) return failed(kNames[w], rc);
      if (recv[0] != 3.0f || recv[kCount - 1] != 3.0f) {
        std::snprintf(res.error, sizeof(res.error), "rank %d: %s: allreduce gave %g, not 3", rank,
                      kNames[w], static_cast<double>(recv[0]));
        return res;
      }
    }
  }
  enterWindow(kAsync);
  uint64_t asyncWrong = 0;
  for (uint64_t i = 0; i < kAsyncCalls; ++i) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(nccl, &async) != ncclSuccess || async != ncclSuccess) ++asyncWrong;
  }
  leaveWindow();
  if (asyncWrong != 0) {
    std::snprintf(res.error, sizeof(res.error), "rank %d: %llu ncclCommGetAsyncError calls failed",
                  rank, static_cast<unsigned long long>(asyncWrong));
    return res;
  }
  res.counts = gCounts;
  if (ncclCommFinalize(nccl) != ncclSuccess || ncclCommDestroy(nccl) != ncclSuccess) {
    return failed("ncclCommFinalize/Destroy", 0);
  }
  if (hc_comm_finalize(comm) != HC_OK || hc_comm_destroy(comm) != HC_OK) {
    return failed("hc_comm_finalize/destroy", 0);
  }
  (void)ncclMemFree(recv);
  (void)ncclMemFree(send);
  res.ok = 1;
  return res;
}

[[noreturn]] void rankMain(int rank, const Ids& ids, bool measured, int fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const RankResult res = runRank(rank, ids, measured);
  const bool written = ::write(fd, &res, sizeof(res)) == static_cast<ssize_t>(sizeof(res));
  ::_exit(written && res.ok ? 0 : 1);
}

// The measured rank's system calls, by window, as the tracer saw them on entry.
struct SyscallCounts {
  uint64_t total[kWindows] = {};
  uint64_t outside[kWindows] = {};       // not inside an hc_* call
  std::map<long, uint64_t> outsideNccl;  // syscall number -> count, nccl window, outside hc
};

// Runs the traced rank to its end: every system call entry is counted in *out. Returns the wait
// status of its end.
int traceToEnd(pid_t pid, SyscallCounts* out) {
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, __WALL) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return status;
    int deliver = 0;
    if (WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      __ptrace_syscall_info info{};
      if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(info), &info) > 0 &&
          info.op == PTRACE_SYSCALL_INFO_ENTRY) {
        errno = 0;
        const long word = ::ptrace(PTRACE_PEEKDATA, pid, const_cast<Probe*>(&gProbe), nullptr);
        if (errno == 0) {
          Probe p;
          std::memcpy(&p, &word, sizeof(p));
          if (p.window > kNone && p.window < kWindows) {
            ++out->total[p.window];
            if (p.hcDepth == 0) {
              ++out->outside[p.window];
              if (p.window == kNccl) ++out->outsideNccl[static_cast<long>(info.entry.nr)];
            }
          }
        }
      }
    } else if (WIFSTOPPED(status)) {
      deliver = WSTOPSIG(status);  // a signal for the rank: pass it on
    }
    ::ptrace(PTRACE_SYSCALL, pid, nullptr, deliver);
  }
}

bool readResult(int fd, RankResult* out) {
  size_t got = 0;
  auto* p = reinterpret_cast<char*>(out);
  while (got < sizeof(*out)) {
    ssize_t n = ::read(fd, p + got, sizeof(*out) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// Kills and reaps the ranks still running when the test leaves early (a failed ASSERT).
struct RankPids {
  pid_t pid[2] = {-1, -1};
  RankPids() = default;
  RankPids(const RankPids&) = delete;
  RankPids& operator=(const RankPids&) = delete;
  ~RankPids() {
    for (pid_t p : pid) {
      if (p <= 0) continue;
      ::kill(p, SIGKILL);
      while (::waitpid(p, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
};

double perOp(uint64_t n) { return static_cast<double>(n) / static_cast<double>(kOps); }

TEST(ShimOverheadTest, NcclAllReduceAddsNoSystemCallOrHeapAllocationPerOperation) {
  if (!heapCounted()) GTEST_SKIP() << "a sanitizer owns malloc: heap calls cannot be counted";
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  // The client library resolves its socket at its first call, in this process and the ranks.
  ::setenv("HC_SOCKET", daemon->socketPath().c_str(), 1);
  Ids ids;
  ASSERT_EQ(hc_get_unique_id(&ids.hc), HC_OK) << hc_get_last_error(nullptr);
  ASSERT_EQ(ncclGetUniqueId(&ids.nccl), ncclSuccess) << ncclGetLastError(nullptr);

  int pipes[2][2];
  ASSERT_EQ(::pipe(pipes[0]), 0);
  ASSERT_EQ(::pipe(pipes[1]), 0);
  std::fflush(nullptr);
  // Rank 0 first: it stops itself for the tracer before anything else, or exits kTraceRefused.
  RankPids ranks;
  const pid_t measured = ranks.pid[0] = ::fork();
  ASSERT_GE(measured, 0);
  if (measured == 0) {
    ::close(pipes[0][0]);
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(kTraceRefused);
    ::raise(SIGSTOP);
    rankMain(0, ids, true, pipes[0][1]);
  }
  ::close(pipes[0][1]);
  int status = 0;
  ASSERT_EQ(::waitpid(measured, &status, 0), measured);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kTraceRefused) {
    ranks.pid[0] = -1;  // reaped
    GTEST_SKIP() << "ptrace(PTRACE_TRACEME) refused here (running under a debugger or tracer?)";
  }
  ASSERT_TRUE(WIFSTOPPED(status)) << "rank 0 did not stop for the tracer: status " << status;
  ASSERT_EQ(
      ::ptrace(PTRACE_SETOPTIONS, measured, nullptr, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL), 0)
      << std::strerror(errno);
  const pid_t peer = ranks.pid[1] = ::fork();
  ASSERT_GE(peer, 0);
  if (peer == 0) {
    ::close(pipes[1][0]);
    rankMain(1, ids, false, pipes[1][1]);
  }
  ::close(pipes[1][1]);
  ASSERT_EQ(::ptrace(PTRACE_SYSCALL, measured, nullptr, 0), 0) << std::strerror(errno);

  // A stuck job must not hold the test until ctest's limit: kill both ranks after 120 s; the
  // trace then ends with the rank's death.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> timedOut{false};
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(120), [&] { return done; })) {
      timedOut = true;
      ::kill(measured, SIGKILL);
      ::kill(peer, SIGKILL);
    }
  });
  SyscallCounts sys;
  const int measuredEnd = traceToEnd(measured, &sys);
  int peerEnd = 0;
  while (::waitpid(peer, &peerEnd, 0) < 0 && errno == EINTR) {
  }
  ranks.pid[0] = ranks.pid[1] = -1;  // both reaped
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  ASSERT_FALSE(timedOut) << "the ranks did not finish within 120 s\n" << daemon->logTail();

  RankResult r0, r1;
  const bool got0 = readResult(pipes[0][0], &r0);
  const bool got1 = readResult(pipes[1][0], &r1);
  ::close(pipes[0][0]);
  ::close(pipes[1][0]);
  ASSERT_TRUE(got0 && r0.ok) << (got0 ? r0.error : "rank 0 died") << " (wait status " << measuredEnd
                             << ")\n"
                             << daemon->logTail();
  ASSERT_TRUE(got1 && r1.ok) << (got1 ? r1.error : "rank 1 died") << " (wait status " << peerEnd
                             << ")\n"
                             << daemon->logTail();
  const Counts& c = r0.counts;

  std::printf("per allreduce, rank 0, %llu operations per API (1 KiB, 2 ranks, one daemon):\n",
              static_cast<unsigned long long>(kOps));
  std::printf("  %-6s %10s %10s %10s %10s %10s %10s\n", "api", "syscalls", "outside", "allocs",
              "outside", "frees", "outside");
  for (Window w : {kHc, kNccl, kProbe}) {
    std::printf("  %-6s %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n",
                w == kHc     ? "hc"
                : w == kNccl ? "nccl"
                             : "probe",
                perOp(sys.total[w]), perOp(sys.outside[w]), perOp(c.allocs[w][0] + c.allocs[w][1]),
                perOp(c.allocs[w][0]), perOp(c.frees[w][0] + c.frees[w][1]), perOp(c.frees[w][0]));
  }
  std::printf(
      "  nccl - hc: %+.3f syscalls, %+.3f allocations per operation (totals; libhcclient's "
      "own vary with timing)\n",
      perOp(sys.total[kNccl]) - perOp(sys.total[kHc]),
      perOp(c.allocs[kNccl][0] + c.allocs[kNccl][1]) - perOp(c.allocs[kHc][0] + c.allocs[kHc][1]));

  // The instrument: the probe's extra call and allocation, exactly once per operation.
  EXPECT_EQ(sys.outside[kProbe], kOps) << "the tracer misses system calls outside hc's calls";
  EXPECT_EQ(c.allocs[kProbe][0], kOps) << "the interposed malloc misses allocations";
  EXPECT_EQ(c.frees[kProbe][0], kOps) << "the interposed free misses frees";
  EXPECT_GT(sys.total[kHc], 0u) << "no system call seen inside hc's calls";
  // hc's calls, once each per operation through either API: then hc's own cost is the same.
  for (Window w : {kHc, kNccl}) {
    EXPECT_EQ(c.hcAllreduce[w], kOps) << "window " << w << ": hc_allreduce calls";
    EXPECT_EQ(c.hcWait[w], kOps) << "window " << w << ": hc_wait calls";
  }
  // What the shim adds, per operation, beside hc's own: nothing.
  std::string which;
  for (const auto& [nr, n] : sys.outsideNccl) {
    which += " syscall " + std::to_string(nr) + " x" + std::to_string(n);
  }
  EXPECT_EQ(sys.outside[kNccl], sys.outside[kHc]) << "the shim's own system calls:" << which;
  EXPECT_EQ(sys.outside[kHc], 0u);
  EXPECT_EQ(c.allocs[kNccl][0], c.allocs[kHc][0]) << "the shim allocates per operation";
  EXPECT_EQ(c.frees[kNccl][0], c.frees[kHc][0]) << "the shim frees per operation";
  EXPECT_EQ(c.allocs[kHc][0], 0u);
  // Heap totals, libhcclient's included: with one operation in flight its allocations do not
  // depend on timing, so the two APIs' totals compare directly.
  EXPECT_EQ(c.allocs[kNccl][0] + c.allocs[kNccl][1], c.allocs[kHc][0] + c.allocs[kHc][1]);
  EXPECT_EQ(c.frees[kNccl][0] + c.frees[kNccl][1], c.frees[kHc][0] + c.frees[kHc][1]);
  // A watchdog's poll: nothing on the heap, system calls only from the throttled hang-up check.
  std::printf("ncclCommGetAsyncError x %llu: %llu system calls, %llu allocations, %llu frees\n",
              static_cast<unsigned long long>(kAsyncCalls),
              static_cast<unsigned long long>(sys.total[kAsync]),
              static_cast<unsigned long long>(c.allocs[kAsync][0] + c.allocs[kAsync][1]),
              static_cast<unsigned long long>(c.frees[kAsync][0] + c.frees[kAsync][1]));
  EXPECT_EQ(c.allocs[kAsync][0] + c.allocs[kAsync][1], 0u);
  EXPECT_EQ(c.frees[kAsync][0] + c.frees[kAsync][1], 0u);
  EXPECT_LT(sys.total[kAsync], kAsyncCalls / 1000);
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

}  // namespace
}  // namespace hc::integ
