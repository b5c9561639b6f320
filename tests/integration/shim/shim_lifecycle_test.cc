// The shim's communicator lifecycle and faults, end to end: each test runs one hc_shim_check mode
// (shim_check_modes.c) as the ranks of a job against a real daemon. Ranks prove that a call did
// not block by leaving a step file that another rank waits for before it unblocks the first, so
// a call that blocks turns into a rank's error, never a passing test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/shim/shim_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr auto kJobTimeout = seconds(60);

// NCCL_VERSION(2, 30, 7) and (2, 30, 2): a caller built against 2.30.7, and one built just
// before ncclTimeout existed.
constexpr int kVersion2307 = 23007;
constexpr int kVersion2302 = 23002;
constexpr int kNcclRemoteError = 6;
constexpr int kNcclTimeout = 8;

// A folder in the daemon's runtime directory where the job's ranks leave their step files.
std::string syncDir(const DaemonProcess& daemon, const std::string& name) {
  const std::string dir = daemon.dir() + "/" + name + "-steps";
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

ShimRankSpec rankOf(ShimLib lib, const DaemonProcess& daemon, std::vector<std::string> args,
                    EnvVars env = {}) {
  ShimRankSpec spec;
  spec.lib = lib;
  spec.socket = daemon.socketPath();
  spec.args = std::move(args);
  spec.env = std::move(env);
  return spec;
}

// Starts the daemon (with flags), makes an id, runs ranks and expects every rank to pass.
void runScenario(const std::vector<std::string>& daemonFlags, const std::string& name,
                 const std::function<std::vector<ShimRankSpec>(const DaemonProcess&)>& ranks) {
  std::string error;
  auto daemon = DaemonProcess::start(daemonFlags, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string id = newShimId(daemon->socketPath(), daemon->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  auto job = ShimJob::start(ranks(*daemon), id, daemon->dir(), name, &error);
  ASSERT_NE(job, nullptr) << error;
  EXPECT_EQ(job->expectAllPassed(kJobTimeout), "") << "\n" << daemon->logTail();
}

// Non-blocking communicators, one way per rank: rank 0 by its ncclConfig_t (libnccl), rank 1 by
// NCCL_COMM_BLOCKING=0 with no config (librccl), rank 2 by ncclCommInitRankScalable inside a
// group. Each call that may return ncclInProgress does so at once: the inits (ncclGroupEnd for
// rank 2), the split with a NULL config (inheriting non-blocking), and finalize with an operation
// outstanding; ncclCommGetAsyncError says ncclInProgress until the other ranks took their part.
TEST(ShimNonBlockingTest, InitSplitAndFinalizeReturnInProgressUntilDone) {
  runScenario({}, "nonblocking", [](const DaemonProcess& d) {
    const std::string steps = syncDir(d, "nonblocking");
    auto rank = [&](ShimLib lib, const char* by, EnvVars env) {
      return rankOf(lib, d, {"--mode", "nonblocking", "--sync", steps, "--by", by}, env);
    };
    return std::vector<ShimRankSpec>{rank(ShimLib::Nccl, "config", {}),
                                     rank(ShimLib::Rccl, "env", {{"NCCL_COMM_BLOCKING", "0"}}),
                                     rank(ShimLib::Nccl, "group", {})};
  });
}

// ncclGroupStart; ncclGroupStart; ncclCommInitRank; ncclGroupEnd; ncclGroupEnd: rank 1 begins its
// init only after rank 0's inner ncclGroupEnd returned, and each outermost end returns with the
// communicator ready. Then a blocking ncclCommFinalize waits for an operation on a stream.
TEST(ShimGroupInitTest, NothingBlocksBeforeTheOutermostGroupEnd) {
  runScenario({}, "group-init", [](const DaemonProcess& d) {
    const std::string steps = syncDir(d, "group-init");
    return std::vector<ShimRankSpec>{
        rankOf(ShimLib::Nccl, d, {"--mode", "group-init", "--sync", steps}),
        rankOf(ShimLib::Rccl, d, {"--mode", "group-init", "--sync", steps})};
  });
}

// The daemon times out an allreduce that the last rank withholds. HC_TIMEOUT is ncclTimeout only
// for libnccl.so.2 with a 2.30.3+ ncclConfig_t; a 2.30.2 config, no config, and librccl.so.1 get
// ncclRemoteError (to them 8 is ncclNumResults). From the call and from ncclCommGetAsyncError.
TEST(ShimTimeoutTest, TimeoutIsNcclTimeoutOnlyForLibncclCallersFrom2303) {
  runScenario({"--op-timeout-ms", "1000"}, "timeout", [](const DaemonProcess& d) {
    const std::string steps = syncDir(d, "timeout");
    auto waiter = [&](ShimLib lib, int version, int want) {
      return rankOf(lib, d,
                    {"--mode", "timeout", "--sync", steps, "--config-version",
                     std::to_string(version), "--want", std::to_string(want)});
    };
    return std::vector<ShimRankSpec>{
        waiter(ShimLib::Nccl, kVersion2307, kNcclTimeout),
        waiter(ShimLib::Nccl, kVersion2302, kNcclRemoteError),
        waiter(ShimLib::Nccl, 0, kNcclRemoteError),
        waiter(ShimLib::Rccl, kVersion2307, kNcclRemoteError),
        rankOf(ShimLib::Nccl, d, {"--mode", "timeout", "--sync", steps})};  // withholds
  });
}

// A second thread aborts the communicator 0.5 s into rank 0's wait on an allreduce that rank 1
// never posts: the abort returns within 1 s and the waiter gets an error within 5 s.
TEST(ShimAbortTest, AbortFromASecondThreadWakesTheWaiterPromptly) {
  runScenario({}, "abort-waiter", [](const DaemonProcess& d) {
    const std::string steps = syncDir(d, "abort-waiter");
    return std::vector<ShimRankSpec>{
        rankOf(ShimLib::Nccl, d, {"--mode", "abort-waiter", "--sync", steps}),
        rankOf(ShimLib::Rccl, d, {"--mode", "abort-waiter", "--sync", steps})};
  });
}

// ncclCommInitAll: every rank of a communicator in one process, two such processes on one daemon
// (2 ranks through libnccl, 3 through librccl; the --nranks after ShimJob's own is the size of
// each process's communicator, whose id each makes itself). Bad device lists and ndev fail with
// NCCL's results and no communicator; then each rank's allreduce, issued from one thread inside
// ncclGroupStart/End, is right on every rank, and ncclCommCuDevice reports the devlist.
TEST(ShimInitAllTest, EveryRankInOneProcessAllreducesThroughAGroup) {
  runScenario({}, "init-all", [](const DaemonProcess& d) {
    return std::vector<ShimRankSpec>{
        rankOf(ShimLib::Nccl, d, {"--mode", "init-all", "--nranks", "2"}),
        rankOf(ShimLib::Rccl, d, {"--mode", "init-all", "--nranks", "3"})};
  });
}

// A non-blocking ncclCommFinalize and at once ncclCommAbort from another thread, 300 times per
// process: the finalize's own thread often reaches hc only after the abort returned, and must
// find the communicator aborted instead of a freed handle (a client that freed it crashed here).
TEST(ShimFinalizeAbortTest, NonBlockingFinalizeThenAbortFromAnotherThreadNeverCrashes) {
  runScenario({}, "finalize-abort", [](const DaemonProcess& d) {
    return std::vector<ShimRankSpec>{rankOf(ShimLib::Nccl, d, {"--mode", "finalize-abort"}),
                                     rankOf(ShimLib::Rccl, d, {"--mode", "finalize-abort"})};
  });
}

// SIGKILL to the daemon while both ranks loop on allreduce: each rank's call fails (no hang)
// within 10 s, and the rank then aborts its communicator and exits.
TEST(ShimDaemonKilledTest, EveryRankGetsAnErrorWithinTenSeconds) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string id = newShimId(daemon->socketPath(), daemon->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  auto job = ShimJob::start({rankOf(ShimLib::Nccl, *daemon, {"--mode", "loop"}),
                             rankOf(ShimLib::Rccl, *daemon, {"--mode", "loop"})},
                            id, daemon->dir(), "daemon-killed", &error);
  ASSERT_NE(job, nullptr) << error;
  for (int r = 0; r < job->nranks(); ++r) {
    ASSERT_TRUE(job->rank(r).waitForOutput("looping", seconds(30)))
        << job->rank(r).output() << daemon->logTail();
  }
  const auto killedAt = Clock::now();
  daemon->kill9();
  for (int r = 0; r < job->nranks(); ++r) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(seconds(10) - (Clock::now() - killedAt));
    EXPECT_TRUE(job->rank(r).waitForOutput("loop ended: ", std::max(left, milliseconds(0))))
        << "rank " << r << ": no error within 10 s of the daemon's death\n"
        << job->rank(r).output();
  }
  EXPECT_EQ(job->expectAllPassed(seconds(10)), "");
}

}  // namespace
}  // namespace hc::integ
