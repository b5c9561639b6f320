// How daemons tell apart the communicators of jobs that share them. A communicator's random key
// used to name it on the wire by its low 16 bits (key bytes 0 and 1), so two jobs whose keys
// share those bits, over the same two daemons, took each other's messages and finished with
// status 0 and wrong data. Every test here runs communicators whose keys share bytes 0 and 1
// (collidingId, familyId), each job contributing values of its own (hc_identity_worker,
// identity_worker.h), and expects every result right on every rank: jobs of a process per rank,
// jobs posted in opposite orders, a rank of one job ending while the other has an op pending, a
// thousand communicators at once, split children, and communicators formed while others are torn
// down. The transfers among 200 ranks and the join's hooks are in comm_identity_join_test.cc.
//
// The workers run hc_identity_worker, which may hold a rank of each of several communicators in
// one process and posts on them in the order a test picks: with the old names, one daemon sending
// job A's message before job B's under one tag while the other posted B's receive first swapped
// their data every time, not only when the timing happened to interleave them.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "hetero_comm/hc.h"
#include "tests/integration/identity_workers.h"
#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Two jobs whose keys collide, each a process per rank (rank 0 on daemon 0, rank 1 on daemon 1),
// released together: 20 rounds of allreduce, broadcast and a send/recv ring at 7, 1, 64 and 1023
// elements, job A's ranks contributing 1 and 2, job B's 100 and 200.
TEST(CommIdentityTest, JobsWithCollidingKeysKeepTheirOwnData) {
  auto s = startCollidingJobs();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::string& idA = s.id;
  const std::string& idB = s.colliding;
  const std::string go = s.cluster->dir() + "/go";
  const std::vector<std::string> common = {"--mode",     "collectives", "--nranks",  "2",
                                           "--iters",    "20",          "--go-file", go,
                                           "--watchdog", "30"};
  Workers w(*s.cluster);
  std::string error;
  for (int r = 0; r < 2; ++r) {
    const std::string rank = std::to_string(r);
    ASSERT_TRUE(w.start("a" + rank, r, concat(common, {"--id", idA, "--rank", rank, "--base", "1"}),
                        &error))
        << error;
    ASSERT_TRUE(w.start("b" + rank, r,
                        concat(common, {"--id", idB, "--rank", rank, "--base", "100"}), &error))
        << error;
  }
  ASSERT_TRUE(w.allPrinted("ready", kReadyTimeout)) << w.report() << s.cluster->logTails();
  touch(go);
  w.expectAllSucceed(kJobTimeout);
  expectFormedAcrossBoth(*s.cluster, 2);
  expectCleanStop(*s.cluster);
}

// The same two jobs held by one process per daemon, which post each operation on both: daemon 0
// gets A's before B's, daemon 1 B's before A's. Any confusion of the two shows every round.
TEST(CommIdentityTest, CollidingJobsPostedInOppositeOrdersKeepTheirOwnData) {
  auto s = startCollidingJobs();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> common = {
      "--mode", "collectives", "--id", s.id, "--id", s.colliding, "--nranks", "2", "--base", "1",
      // Job B's base: its ranks contribute 100 and 200.
      "--base-step", "99", "--iters", "20", "--watchdog", "30"};
  Workers w(*s.cluster);
  ASSERT_EQ(w.startRanks(2, common, {{"--order", "forward"}, {"--order", "reverse"}}), "");
  w.expectAllSucceed(kJobTimeout);
  expectFormedAcrossBoth(*s.cluster, 2);
  expectCleanStop(*s.cluster);
}

// How a rank of job A goes away while job B, whose key collides with A's, has an allreduce
// pending (posted by B's rank 0 before A existed, joined by B's rank 1 only afterwards).
struct Ending {
  std::string name;
  std::string end;  // the --end of A's rank 1 after its 3 rounds: abort, destroy or hold
  bool killed;      // hold, then SIGKILL from the test
  bool peerFails;   // A's rank 0 keeps posting and must see its op fail
};

void PrintTo(const Ending& e, std::ostream* os) { *os << e.name; }

class CommIdentityEndingTest : public ::testing::TestWithParam<Ending> {};

// A's failure notices (or goodbyes) travel under A's identity: B's pending op and the 10 rounds
// after it are right, and A's surviving rank learns of the failure instead of hanging.
TEST_P(CommIdentityEndingTest, EndingARankOfOneJobLeavesTheCollidingJobRight) {
  const Ending& e = GetParam();
  auto s = startCollidingJobs();
  ASSERT_FALSE(s.id.empty()) << s.error;
  // B forms first: a daemon whose watches of A and B looked alike would give B A's notice.
  const std::string& idB = s.id;
  const std::string& idA = s.colliding;
  const std::string goB = s.cluster->dir() + "/go-b";
  const std::vector<std::string> jobB = {"--mode",   "collectives", "--id",       idB,
                                         "--nranks", "2",           "--base",     "100",
                                         "--iters",  "10",          "--watchdog", "60"};
  Workers w(*s.cluster);
  std::string error;
  ASSERT_TRUE(w.start("b0", 0, concat(jobB, {"--rank", "0"}), &error)) << error;
  ASSERT_TRUE(w.start("b1", 1, concat(jobB, {"--rank", "1", "--go-file", goB}), &error)) << error;
  ASSERT_TRUE(w["b0"].waitForOutput("posted", kReadyTimeout)) << w.report();
  ASSERT_TRUE(w["b1"].waitForOutput("ready", kReadyTimeout)) << w.report();

  const std::vector<std::string> jobA = {"--mode", "collectives", "--id", idA,          "--nranks",
                                         "2",      "--base",      "1",    "--watchdog", "30"};
  const std::string peerRounds = e.peerFails ? "1000" : "3";  // a failure ends them early
  ASSERT_TRUE(w.start("a0", 0,
                      concat(jobA, {"--rank", "0", "--iters", peerRounds, "--expect-failure",
                                    e.peerFails ? "1" : "0"}),
                      &error))
      << error;
  ASSERT_TRUE(
      w.start("a1", 1, concat(jobA, {"--rank", "1", "--iters", "3", "--end", e.end}), &error))
      << error;
  if (e.killed) {
    ASSERT_TRUE(w["a1"].waitForOutput("holding", kReadyTimeout)) << w.report();
    w["a1"].sendSignal(SIGKILL);
  } else {
    ASSERT_TRUE(w["a1"].waitExit(kReadyTimeout)) << w.report() << s.cluster->logTails();
    EXPECT_EQ(w.problemsOf("a1"), "") << w.report();
  }
  ASSERT_TRUE(w["a0"].waitExit(seconds(20))) << "A's rank 0 did not finish (or hear of rank 1)\n"
                                             << w.report() << s.cluster->logTails();
  EXPECT_EQ(w.problemsOf("a0"), "") << w.report() << s.cluster->logTails();
  const auto a0 = findStatusLine(w["a0"].output(), "result");
  ASSERT_TRUE(a0.has_value()) << w.report();
  if (e.peerFails) {
    EXPECT_TRUE(a0->status == HC_UNAVAILABLE || a0->status == HC_REMOTE_ERROR)
        << "status " << a0->status << ": " << a0->text;
  } else {
    EXPECT_EQ(a0->status, HC_OK) << a0->text;
  }

  touch(goB);
  ASSERT_TRUE(w["b0"].waitExit(kJobTimeout)) << w.report() << s.cluster->logTails();
  ASSERT_TRUE(w["b1"].waitExit(kJobTimeout)) << w.report() << s.cluster->logTails();
  EXPECT_EQ(w.problemsOf("b0") + w.problemsOf("b1"), "") << w.report() << s.cluster->logTails();
  expectCleanStop(*s.cluster);
}

INSTANTIATE_TEST_SUITE_P(Endings, CommIdentityEndingTest,
                         ::testing::Values(Ending{"Abort", "abort", false, true},
                                           Ending{"Kill", "hold", true, true},
                                           // Both ranks of A destroy their handles after their
                                           // rounds: daemon 1's goodbye must reach A alone.
                                           Ending{"Destroy", "destroy", false, false}),
                         [](const auto& p) { return p.param.name; });

// A thousand communicators between the same two daemons, all with keys that share bytes 0 and 1,
// formed at once and each running two allreduces (7 and 1 elements, values 1 + 7j for
// communicator j) posted on all of them before any is waited for. One process per daemon holds
// a rank of each. The client keeps at most a completion ring's worth of operations (256 by
// default) in flight per process and waits for credits beyond it, so the two processes cannot
// post in opposite orders (each would hold its credits on operations the other has yet to post);
// daemon 1's swaps each pair instead (1, 0, 3, 2, ...): every pair of neighbours reaches the two
// daemons in opposite orders, and any prefix of either order holds whole pairs of the other.
// Nothing else limits communicators per client.
TEST(CommIdentityTest, AThousandSpanningCommunicatorsPostedAtOnceKeepTheirOwnData) {
  constexpr int kComms = 1000;
  auto s = startCluster();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> ids = familyIds(s.id, kComms);
  expectCollide(ids.front(), ids.back());
  const std::string idsFile = writeIds(s.cluster->dir() + "/ids-1000", ids);
  ASSERT_FALSE(idsFile.empty());
  const std::vector<std::string> common = {
      "--mode", "collectives", "--ids",       idsFile, "--nranks",   "2",
      "--base", "1",           "--base-step", "7",     "--iters",    "2",
      "--ops",  "allreduce",   "--counts",    "7,1",   "--watchdog", "60"};
  Workers w(*s.cluster);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(w.startRanks(2, common, {{"--order", "forward"}, {"--order", "pairs"}}), "");
  w.expectAllSucceed(seconds(90));
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  RecordProperty("milliseconds", static_cast<int>(took.count()));
  expectFormedAcrossBoth(*s.cluster, kComms);
  expectCleanStop(*s.cluster);
}

// Two jobs with colliding keys, 4 ranks each (0 and 2 on daemon 0, 1 and 3 on daemon 1; rank r
// of both jobs in one process, which posts A's first on daemon 0 and B's first on daemon 1),
// split into the pairs {0, 1} and {2, 3} (keys reversed), each pair spanning both daemons: the
// children of A and B have the same colors from parents whose keys collide. Rounds on the
// children (bases 11, 12 for A's, 1001, 1002 for B's), then one more on the parents.
TEST(CommIdentityTest, SplitChildrenOfCollidingParentsKeepTheirOwnData) {
  auto s = startCollidingJobs();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> common = {
      "--mode", "split", "--id",        s.id, "--id",    s.colliding, "--nranks",   "4",
      "--base", "1",     "--base-step", "99", "--iters", "6",         "--watchdog", "30"};
  Workers w(*s.cluster);
  const std::vector<std::string> forward = {"--order", "forward"};
  const std::vector<std::string> reverse = {"--order", "reverse"};
  ASSERT_EQ(w.startRanks(4, common, {forward, reverse, forward, reverse}), "");
  w.expectAllSucceed(kJobTimeout);
  expectCleanStop(*s.cluster);
}

// Five communicators with colliding keys one after the other over the same two daemons: each is
// formed while the one before it is being destroyed, and runs 3 rounds of its own values.
TEST(CommIdentityTest, CommunicatorFormedWhileACollidingOneIsTornDownKeepsItsOwnData) {
  constexpr int kComms = 5;
  auto s = startCluster();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::string idsFile = writeIds(s.cluster->dir() + "/ids-relay", familyIds(s.id, kComms));
  ASSERT_FALSE(idsFile.empty());
  const std::vector<std::string> common = {
      "--mode", "relay",       "--ids", idsFile,   "--nranks", "2",          "--base",
      "1",      "--base-step", "10",    "--iters", "3",        "--watchdog", "30"};
  Workers w(*s.cluster);
  ASSERT_EQ(w.startRanks(2, common), "");
  w.expectAllSucceed(kJobTimeout);
  expectFormedAcrossBoth(*s.cluster, kComms);
  expectCleanStop(*s.cluster);
}

}  // namespace
}  // namespace hc::integ
