// Faults in a communicator that spans daemons, while its ranks loop on verified allreduces: a
// daemon killed (SIGKILL), a daemon that stops answering (SIGSTOP), a rank process killed. Every
// surviving rank, on every surviving daemon, must get an error within a bounded time and exit,
// and the surviving daemons must go on serving new communicators. Daemons talk over UCX tcp,self,
// as on separate nodes (see multi_daemon.h). Timed, so these run alone (RUN_SERIAL).
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// 1 MiB of int32 per allreduce: every iteration moves data between the daemons for a while, so a
// fault lands in the middle of transfers.
const std::vector<std::string> kLoopArgs = {"--mode", "loop", "--count", "262144"};

// Starts the looping job and waits until every rank has completed an iteration, then a little
// more so that the fault comes mid-loop.
std::unique_ptr<ClusterJob> startLooping(DaemonCluster& cluster, const std::vector<int>& placement,
                                         std::string* error) {
  auto job = ClusterJob::start(cluster, "loop", placement, kLoopArgs, error);
  if (!job) return nullptr;
  if (!job->waitAllOutput("progress", seconds(30))) {
    *error = "not every rank made progress\n" + job->report() + cluster.logTails();
    return nullptr;
  }
  std::this_thread::sleep_for(milliseconds(300));
  return job;
}

// Expects process i of job to print a non-zero "result status=" within `within` of t0, and to exit
// (code 3) soon after. Returns the status seen (-1 if none).
int expectFailsWithin(ClusterJob& job, DaemonCluster& cluster, int i, Clock::time_point t0,
                      milliseconds within) {
  SCOPED_TRACE("rank " + std::to_string(job.spec(i).rank) + " on daemon " +
               std::to_string(job.spec(i).daemon));
  auto left = std::chrono::duration_cast<milliseconds>(within - (Clock::now() - t0));
  bool failed = job.proc(i).waitForOutput("result status=", std::max(left, milliseconds(0)));
  auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  if (!failed) {
    ADD_FAILURE() << "no error within " << within.count() << " ms of the fault (waited " << tookMs
                  << " ms)\n"
                  << job.report() << cluster.logTails();
    return -1;
  }
  auto result = findStatusLine(job.proc(i).output(), "result");
  EXPECT_TRUE(result.has_value());
  if (!result) return -1;
  std::printf("  rank %d on daemon %d: status=%d after %lld ms: %s\n", job.spec(i).rank,
              job.spec(i).daemon, result->status, static_cast<long long>(tookMs),
              result->text.c_str());
  EXPECT_NE(result->status, 0) << result->text;
  EXPECT_FALSE(result->text.empty());
  EXPECT_TRUE(job.proc(i).waitExit(seconds(5))) << "did not exit after its error\n" << job.report();
  EXPECT_EQ(job.proc(i).exitCode(), 3) << job.report();
  return result->status;
}

// A new communicator of `placement` over the cluster runs demo mode (each collective at 1, 4097
// and 1Mi+3 elements, verified) correctly.
void expectNewCommunicatorWorks(DaemonCluster& cluster, const std::string& name,
                                const std::vector<int>& placement) {
  SCOPED_TRACE("new communicator " + name);
  std::string error;
  auto job = ClusterJob::start(cluster, name, placement, {"--mode", "demo"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, cluster, seconds(60));
}

// Three daemons: ranks 0, 1 on daemon 0 (the root), 2 on daemon 1, 3 on daemon 2. Daemon 1 dies.
TEST(MultiDaemonFailureTest, DaemonKilledFailsEveryRankOnTheOtherDaemonsWithinFiveSeconds) {
  std::string error;
  ClusterOptions options;
  options.daemons = 3;
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = startLooping(*cluster, {0, 0, 1, 2}, &error);
  ASSERT_NE(job, nullptr) << error;

  auto killedAt = Clock::now();
  cluster->daemon(1).kill9();
  for (int r : {0, 1, 3}) expectFailsWithin(*job, *cluster, r, killedAt, seconds(5));
  // Rank 2 lost its own daemon: Unavailable from the client library.
  EXPECT_EQ(expectFailsWithin(*job, *cluster, 2, killedAt, seconds(5)), 6 /* HC_UNAVAILABLE */);
  if (HasFailure()) return;

  // The survivors serve new communicators: on one daemon, and across the two that are left.
  expectNewCommunicatorWorks(*cluster, "after-one-daemon", {0, 0});
  expectNewCommunicatorWorks(*cluster, "after-two-daemons", {0, 2});
  for (int d : {0, 2}) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

// Daemon 1 is stopped (SIGSTOP): its TCP connections stay open, so only the silence check
// (peer.silence_timeout_ms=2000 on every daemon) can tell. The ranks on daemon 0 must fail within
// the silence timeout plus slack; once daemon 1 runs again, its own ranks must fail too.
TEST(MultiDaemonFailureTest, StoppedDaemonFailsTheRanksOnTheOtherDaemonAfterTheSilenceTimeout) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "peer.silence_timeout_ms=2000"};
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = startLooping(*cluster, {0, 0, 1, 1}, &error);
  ASSERT_NE(job, nullptr) << error;

  auto stoppedAt = Clock::now();
  cluster->daemon(1).process().sendSignal(SIGSTOP);
  for (int r : {0, 1}) expectFailsWithin(*job, *cluster, r, stoppedAt, seconds(8));
  cluster->daemon(1).process().sendSignal(SIGCONT);
  auto continuedAt = Clock::now();
  for (int r : {2, 3}) expectFailsWithin(*job, *cluster, r, continuedAt, seconds(8));
  if (HasFailure()) return;
  expectNewCommunicatorWorks(*cluster, "after-on-daemon-0", {0, 0});
}

// Rank 3 (on daemon 1) is killed mid-loop: its daemon fails the communicator and tells daemon 0,
// whose ranks must fail within 5 s, as must rank 2 beside the victim.
TEST(MultiDaemonFailureTest, RankKilledFailsTheRanksOnTheOtherDaemonWithinFiveSeconds) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = startLooping(*cluster, {0, 0, 1, 1}, &error);
  ASSERT_NE(job, nullptr) << error;

  auto killedAt = Clock::now();
  job->proc(3).sendSignal(SIGKILL);
  for (int r : {0, 1, 2}) expectFailsWithin(*job, *cluster, r, killedAt, seconds(5));
  if (HasFailure()) return;
  expectNewCommunicatorWorks(*cluster, "after", {0, 1});
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

}  // namespace
}  // namespace hc::integ
