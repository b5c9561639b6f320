// The shim's communicator lifecycle and faults, end to end: each test runs one hc_shim_check mode
// (shim_check_modes.c) as the ranks of a job against a real daemon. Ranks prove that a call did
// not block by leaving a step file that another rank waits for before it unblocks the first, so
// a call that blocks turns into a rank's error, never a passing test. Mixed jobs on one daemon
// and across two: ranks that disagree on an operation, and collectives on sim device memory
// (shim_check_sim.c).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/multi_daemon.h"
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

// Where a mixed job's ranks run: rank r uses libnccl.so.2 when even, librccl.so.1 when odd.
// OneDaemon: all on one. Alternate: rank r on daemon r % 2, so each daemon holds one library's
// ranks and only the daemons' comparison sees the two sides disagree. Paired: ranks 0 and 1 on
// daemon 0, 2 and 3 on daemon 1, so each daemon holds both sides (in the disagree mode ranks 2
// and 3 issue later, so daemon 0 finds the disagreement and daemon 1's ranks learn it from there).
enum class Placement { OneDaemon, Alternate, Paired };

const char* placementName(Placement p) {
  switch (p) {
    case Placement::OneDaemon:
      return "OneDaemon";
    case Placement::Alternate:
      return "TwoDaemonsAlternate";
    case Placement::Paired:
      return "TwoDaemonsPaired";
  }
  return "?";
}

// The rest of the line after the first `prefix` in out; "" when there is none.
std::string lineAfter(const std::string& out, const std::string& prefix) {
  const size_t at = out.find(prefix);
  if (at == std::string::npos) return "";
  const size_t begin = at + prefix.size();
  return out.substr(begin, out.find('\n', begin) - begin);
}

// Starts the daemons of placement (each with daemonFlags), makes an id at daemon 0, runs nranks
// ranks of a mixed job with args(steps folder) and expects every rank to pass; then inspect(job)
// for what the ranks printed, and a clean stop of a lone daemon (it survived the job).
void runMixedJob(Placement placement, int nranks, const std::vector<std::string>& daemonFlags,
                 const std::string& name,
                 const std::function<std::vector<std::string>(const std::string& steps)>& args,
                 const std::function<void(ShimJob&)>& inspect = nullptr) {
  std::string error;
  std::unique_ptr<DaemonProcess> daemon;
  std::unique_ptr<DaemonCluster> cluster;
  std::vector<std::string> sockets;
  std::string dir;
  if (placement == Placement::OneDaemon) {
    daemon = DaemonProcess::start(daemonFlags, &error);
    ASSERT_NE(daemon, nullptr) << error;
    sockets = {daemon->socketPath()};
    dir = daemon->dir();
  } else {
    ClusterOptions options;
    options.daemonArgs = daemonFlags;
    cluster = DaemonCluster::start(options, &error);
    ASSERT_NE(cluster, nullptr) << error;
    sockets = {cluster->daemon(0).socketPath(), cluster->daemon(1).socketPath()};
    dir = cluster->dir();
  }
  auto logs = [&] { return daemon ? daemon->logTail() : cluster->logTails(); };
  const std::string id = newShimId(sockets[0], dir, &error);
  ASSERT_FALSE(id.empty()) << error;
  const std::string steps = dir + "/" + name + "-steps";
  ::mkdir(steps.c_str(), 0700);
  std::vector<ShimRankSpec> ranks;
  for (int r = 0; r < nranks; ++r) {
    ShimRankSpec spec;
    spec.lib = r % 2 == 0 ? ShimLib::Nccl : ShimLib::Rccl;
    const int d = placement == Placement::OneDaemon   ? 0
                  : placement == Placement::Alternate ? r % 2
                                                      : r / 2 % 2;
    spec.socket = sockets[static_cast<size_t>(d)];
    spec.args = args(steps);
    ranks.push_back(spec);
  }
  auto job = ShimJob::start(ranks, id, dir, name, &error);
  ASSERT_NE(job, nullptr) << error;
  EXPECT_EQ(job->expectAllPassed(kJobTimeout), "") << "\n" << logs();
  if (inspect) inspect(*job);
  if (daemon) {
    EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
  }
}

// Even ranks (libnccl.so.2) issue ncclAllReduce(1024, int32, sum); odd ranks (librccl.so.1)
// change one thing: one more element, ncclBroadcast instead, or float32; all on the NULL stream,
// or all on a stream handle. Every rank gets ncclInvalidArgument (hc's InvalidArgument) from the
// call (NULL stream) or from the call or ncclCommGetAsyncError (stream) within 10 s, with a
// ncclGetLastError text naming the mismatch and the odd ranks' side of it; the operation after it
// fails; then a fresh communicator of the same ranks works on the same daemons. Paired (each
// daemon holds both sides): daemon 0 finds it first and fails the communicator everywhere, and
// daemon 1's ranks get ncclRemoteError whose text names the mismatch as daemon 0 found it (a
// failure notice carries the failure's words). Where one comparison finds the disagreement (one
// daemon, or the daemons' comparison when each holds one side) every rank reads the same text.
class ShimDisagreeTest : public ::testing::TestWithParam<std::tuple<std::string, bool, Placement>> {
};

TEST_P(ShimDisagreeTest, EveryRankGetsTheMismatchAndTheDaemonsServeAFreshCommunicator) {
  const auto& [field, onStream, placement] = GetParam();
  const std::string by =
      field + (onStream ? "+stream" : "") + (placement == Placement::Paired ? "+remote" : "");
  auto args = [&](const std::string& steps) {
    return std::vector<std::string>{"--mode", "disagree", "--sync", steps, "--by", by};
  };
  runMixedJob(placement, 4, {}, "disagree-" + field, args, [&](ShimJob& job) {
    // Paired: daemon 1's ranks (2 and 3) read daemon 0's finding behind the words that say where
    // it came from, so they agree with each other rather than with ranks 0 and 1.
    for (int r = 1; r < job.nranks(); ++r) {
      const int like = placement == Placement::Paired && r >= 2 ? 2 : 0;
      if (r == like) continue;
      EXPECT_EQ(lineAfter(job.rank(r).output(), "disagreement text: "),
                lineAfter(job.rank(like).output(), "disagreement text: "))
          << "rank " << r << " read another text than rank " << like;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    FieldsStreamsAndPlacements, ShimDisagreeTest,
    ::testing::Combine(::testing::Values("count", "op", "dtype"), ::testing::Bool(),
                       ::testing::Values(Placement::OneDaemon, Placement::Alternate,
                                         Placement::Paired)),
    [](const auto& p) {
      return std::get<0>(p.param) + (std::get<1>(p.param) ? "_Stream_" : "_NullStream_") +
             placementName(std::get<2>(p.param));
    });

// Simulated device memory through the shim, in processes with no GPU runtime: libnccl.so.2 ranks
// on sim "nvidia" memory and streams, librccl.so.1 ranks on sim "amd" ones, in one communicator.
// Allreduce, reduce, broadcast, allgather, reduce-scatter (in place and out), all-to-all and a
// send/recv ring, at counts 0, 1, 7 and 65537, on a sim stream passed as the cudaStream_t
// (hipStream_t) and on the NULL stream; each result, read back through hc_sim_memcpy, equals
// what the rank computed from the inputs (shim_check_sim.c). Chunks of 16 KiB, between daemons
// and in device staging, cut the larger count into many pieces with a ragged last one.
class ShimSimMemoryTest : public ::testing::TestWithParam<Placement> {};

TEST_P(ShimSimMemoryTest, CollectivesOnSimDeviceMemoryAreRightOnEveryRank) {
  const std::vector<std::string> flags = {
      "--set", "devices.sim.nvidia=1",   "--set", "devices.sim.amd=1",
      "--set", "peer.chunk_bytes=16384", "--set", "devices.staging_chunk_bytes=16384"};
  runMixedJob(GetParam(), 4, flags, "sim", [](const std::string&) {
    return std::vector<std::string>{"--mode", "sim"};
  });
}

INSTANTIATE_TEST_SUITE_P(Placements, ShimSimMemoryTest,
                         ::testing::Values(Placement::OneDaemon, Placement::Alternate,
                                           Placement::Paired),
                         [](const auto& p) { return std::string(placementName(p.param)); });

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
