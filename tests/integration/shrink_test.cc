// Survivors carry on: after a rank is killed (kill -9), or its whole daemon with it, the survivors
// shrink the communicator and run 100 verified allreduces on the child; a revoke ends an
// operation in flight on every rank; survivors that name different exclude lists all fail with
// HC_INVALID_ARGUMENT. On one daemon and across daemons (UCX tcp,self, as multi_daemon.h says).
// Processes are killed and timed: these run alone (RUN_SERIAL).
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

constexpr int kInvalidArgument = 3;  // HC_INVALID_ARGUMENT
constexpr int kUnavailable = 6;      // HC_UNAVAILABLE
constexpr int kTimeout = 7;          // HC_TIMEOUT
constexpr int kUnsupported = 12;     // HC_UNSUPPORTED

// An odd count: 100 allreduces of it on the child, after the loop on the parent.
const std::vector<std::string> kShrinkArgs = {"--count", "4097"};

std::vector<std::string> withArgs(std::vector<std::string> args, const std::string& mode,
                                  const std::string& exclude, const std::string& phase) {
  args.insert(args.end(), {"--mode", mode, "--exclude", exclude, "--phase", phase});
  return args;
}

// A survivor shrank to (rank, size), ran every allreduce on the child right and exited 0.
void expectCarriedOn(ChildProcess& p, const std::string& report, int rank, int size) {
  ASSERT_TRUE(p.waitExit(seconds(60))) << "did not finish\n" << report;
  const std::string out = p.output();
  auto shrink = findStatusLine(out, "shrink");
  ASSERT_TRUE(shrink.has_value()) << out;
  EXPECT_EQ(shrink->status, 0) << shrink->text << "\n" << report;
  EXPECT_NE(
      out.find("shrink status=0 rank=" + std::to_string(rank) + " size=" + std::to_string(size)),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("child iters 100\n#wrong 0\n"), std::string::npos) << out;
  EXPECT_EQ(p.exitCode(), 0) << report;
}

TEST(ShrinkTest, RankKilledThenSurvivorsShrinkAndRun100Allreduces) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job =
      RankJob::start(*daemon, "shrink", 4, withArgs(kShrinkArgs, "shrink", "1", "abort"), &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("progress", seconds(20))) << job->report();
  job->rank(1).sendSignal(SIGKILL);
  for (int r : {0, 2, 3}) {
    SCOPED_TRACE("survivor " + std::to_string(r));
    expectCarriedOn(job->rank(r), job->report() + daemon->logTail(), r == 0 ? 0 : r - 1, 3);
  }
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

TEST(ShrinkTest, DifferentExcludeListsFailEverySurvivor) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  // Ranks 0 and 1 leave out rank 3, ranks 2 and 3 leave out rank 1.
  auto job = RankJob::start(*daemon, "mismatch", 4, {"--mode", "shrinkmismatch"}, &error,
                            [](int rank) -> std::vector<std::string> {
                              return {"--exclude", rank < 2 ? "3" : "1"};
                            });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(60))) << job->report();
  for (int r = 0; r < 4; ++r) {
    auto shrink = findStatusLine(job->rank(r).output(), "shrink");
    ASSERT_TRUE(shrink.has_value()) << job->report();
    EXPECT_EQ(shrink->status, kInvalidArgument) << shrink->text;
    EXPECT_NE(shrink->text.find("exclude lists differ"), std::string::npos) << shrink->text;
    EXPECT_EQ(job->rank(r).exitCode(), 0) << job->report();
  }
}

// Rank 2 (on daemon 1) revokes while ranks 0 and 1 wait in an allreduce it never posts: both
// fail (rank 0 through its daemon's failure notice) and revoke too, the revoker's finalize is
// refused; all three split the revoked communicator by parity and allreduce on the halves,
// then shrink with nobody excluded (the parent is idle now) and carry on.
TEST(ShrinkTest, RevokeEndsAnOperationInFlightOnEveryDaemonThenAllShrink) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "revoke", {0, 1, 1},
                               withArgs(kShrinkArgs, "revoke", "", "default"), &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(90))) << job->report() << cluster->logTails();
  for (int r : {0, 1}) {
    auto result = findStatusLine(job->proc(r).output(), "result");
    ASSERT_TRUE(result.has_value()) << job->report();
    EXPECT_EQ(result->status, kUnavailable) << result->text;
    EXPECT_NE(result->text.find("revoked"), std::string::npos) << result->text;
  }
  auto revoke = findStatusLine(job->proc(2).output(), "revoke");
  auto finalize = findStatusLine(job->proc(2).output(), "finalize");
  ASSERT_TRUE(revoke.has_value() && finalize.has_value()) << job->report();
  EXPECT_EQ(revoke->status, 0) << revoke->text;
  EXPECT_EQ(finalize->status, kUnsupported) << finalize->text;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string out = job->proc(r).output();
    auto split = findStatusLine(out, "split");
    ASSERT_TRUE(split.has_value()) << out;
    EXPECT_EQ(split->status, 0) << split->text;
    EXPECT_NE(out.find("half status=0 wrong=0"), std::string::npos) << out;
    expectCarriedOn(job->proc(r), job->report() + cluster->logTails(), r, 3);
  }
}

// Rank 0 has an allreduce outstanding that nobody else posts: a shrink with NCCL_SHRINK_DEFAULT
// is refused on every rank, the same shrink with NCCL_SHRINK_ABORT stops that allreduce and
// forms the child.
TEST(ShrinkTest, DefaultShrinkNeedsAnIdleParentAndAbortStopsItsOperations) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job =
      RankJob::start(*daemon, "busy", 3, withArgs(kShrinkArgs, "shrinkbusy", "", "abort"), &error);
  ASSERT_NE(job, nullptr) << error;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    expectCarriedOn(job->rank(r), job->report() + daemon->logTail(), r, 3);
    auto refused = findStatusLine(job->rank(r).output(), "default");
    ASSERT_TRUE(refused.has_value()) << job->report();
    EXPECT_EQ(refused->status, kInvalidArgument) << refused->text;
    EXPECT_NE(refused->text.find("not idle"), std::string::npos) << refused->text;
  }
  auto pending = findStatusLine(job->rank(0).output(), "pending");
  ASSERT_TRUE(pending.has_value()) << job->report();
  EXPECT_EQ(pending->status, kUnavailable) << pending->text;
  EXPECT_NE(pending->text.find("NCCL_SHRINK_ABORT"), std::string::npos) << pending->text;
}

// Rank 2 (on daemon 1) is killed: ranks 0, 1 (daemon 0) and 3 (daemon 1) shrink across the two
// daemons, rooted at daemon 0.
TEST(ShrinkTest, RankKilledOnAnotherDaemonThenSurvivorsShrinkAcrossDaemons) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "shrink2", {0, 0, 1, 1},
                               withArgs(kShrinkArgs, "shrink", "2", "default"), &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("progress", seconds(30))) << job->report();
  job->proc(2).sendSignal(SIGKILL);
  for (int r : {0, 1, 3}) {
    SCOPED_TRACE("survivor " + std::to_string(r));
    expectCarriedOn(job->proc(r), job->report() + cluster->logTails(), r < 2 ? r : 2, 3);
  }
}

// The daemon that rooted the communicator dies with both its ranks: the survivors on daemons 1
// and 2 shrink, rooted at daemon 1 (that of rank 2, the lowest survivor).
TEST(ShrinkTest, RootDaemonKilledWithItsRanksThenTheRestShrink) {
  std::string error;
  ClusterOptions options;
  options.daemons = 3;
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "rootgone", {0, 0, 1, 2},
                               withArgs(kShrinkArgs, "shrink", "0,1", "abort"), &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("progress", seconds(30))) << job->report();
  cluster->daemon(0).kill9();
  for (int r : {0, 1}) job->proc(r).sendSignal(SIGKILL);
  for (int r : {2, 3}) {
    SCOPED_TRACE("survivor " + std::to_string(r));
    expectCarriedOn(job->proc(r), job->report() + cluster->logTails(), r - 2, 2);
  }
}

TEST(ShrinkTest, DifferentExcludeListsFailEverySurvivorAcrossDaemons) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  // Daemon 0's ranks leave out rank 3, daemon 1's leave out rank 1: the same size and the same
  // lowest survivor, so only the root's comparison of the lists can tell.
  auto job = ClusterJob::start(*cluster, "mismatch2", {0, 0, 1, 1}, {"--mode", "shrinkmismatch"},
                               &error, [](int rank) -> std::vector<std::string> {
                                 return {"--exclude", rank < 2 ? "3" : "1"};
                               });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(60))) << job->report() << cluster->logTails();
  for (int r = 0; r < 4; ++r) {
    auto shrink = findStatusLine(job->proc(r).output(), "shrink");
    ASSERT_TRUE(shrink.has_value()) << job->report();
    EXPECT_EQ(shrink->status, kInvalidArgument) << shrink->text;
    EXPECT_EQ(job->proc(r).exitCode(), 0) << job->report();
  }
}

// Daemon 0's ranks leave out rank 3, daemon 1's leave out ranks 0 and 1: no root sees both
// lists. Daemon 1's ranks agree among themselves and form a child of two (what their lists ask
// for); daemon 0's wait at their root for rank 2, which never comes, and the deadline's error
// asks whether every survivor excluded the same ranks.
TEST(ShrinkTest, ListsNamingAnotherLowestSurvivorMeetAtAnotherRoot) {
  std::string error;
  ClusterOptions options;
  options.daemonArgs = {"--set", "comm.init_timeout_ms=1500"};
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "tworoots", {0, 0, 1, 1}, {"--mode", "shrinkmismatch"},
                               &error, [](int rank) -> std::vector<std::string> {
                                 return {"--exclude", rank < 2 ? "3" : "0,1"};
                               });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(60))) << job->report() << cluster->logTails();
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    auto shrink = findStatusLine(job->proc(r).output(), "shrink");
    ASSERT_TRUE(shrink.has_value()) << job->report();
    if (r >= 2) {
      EXPECT_EQ(shrink->status, 0) << shrink->text;
      continue;
    }
    EXPECT_EQ(shrink->status, kTimeout) << shrink->text;
    EXPECT_NE(shrink->text.find("exclude the same ranks"), std::string::npos) << shrink->text;
    EXPECT_EQ(job->proc(r).exitCode(), 0) << job->report();
  }
}

}  // namespace
}  // namespace hc::integ
