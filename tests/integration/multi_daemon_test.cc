// Communicators that span daemons (multi-node), on one machine: every daemon runs UCX with
// UCX_TLS=tcp,self, so daemons on this host reach each other only over TCP sockets, as daemons on
// separate nodes do (see multi_daemon.h). Each worker verifies its results against references
// computed from every rank's seeds, so these tests check the data the daemons move between them,
// for several placements of ranks on daemons.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

// The matrix takes 7-25 s for 4 ranks on 2 cores (more under a loaded CI machine); a hang shows up
// as the worker's watchdog (30 s without progress) or this timeout, with every rank's output.
constexpr auto kMatrixTimeout = seconds(150);
constexpr auto kJobTimeout = seconds(90);

struct Placement {
  std::string name;
  std::vector<int> daemonOfRank;  // rank r runs against daemon daemonOfRank[r]
};

void PrintTo(const Placement& p, std::ostream* os) { *os << p.name; }

int daemonCount(const std::vector<int>& placement) {
  return 1 + *std::max_element(placement.begin(), placement.end());
}

// Each daemon says it formed the communicator across all of them, holding its share of ranks:
// the job really crossed daemons (no daemon served it alone).
void expectFormedAcrossDaemons(DaemonCluster& cluster, const std::vector<int>& placement) {
  const int daemons = daemonCount(placement);
  for (int d = 0; d < daemons; ++d) {
    const auto here = std::count(placement.begin(), placement.end(), d);
    const std::string line = "formed across " + std::to_string(daemons) +
                             " daemons: " + std::to_string(placement.size()) + " ranks, " +
                             std::to_string(here) + " here";
    EXPECT_NE(cluster.daemon(d).log().find(line), std::string::npos)
        << "daemon " << d << " never logged '" << line << "'\n"
        << cluster.logTails();
  }
}

// Runs one job to completion over a fresh cluster and expects "#wrong 0" from every rank, then a
// clean stop of every daemon.
void runClusterJob(const std::string& name, const std::vector<int>& placement,
                   std::vector<std::string> args, std::chrono::seconds timeout) {
  std::string error;
  ClusterOptions options;
  options.daemons = daemonCount(placement);
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  args.insert(args.end(), {"--watchdog", "30"});
  auto job = ClusterJob::start(*cluster, name, placement, args, &error);
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, timeout);
  expectFormedAcrossDaemons(*cluster, placement);
  job.reset();
  for (int d = 0; d < cluster->size(); ++d) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

class MultiDaemonMatrixTest : public ::testing::TestWithParam<Placement> {};

// Every operation x dtype x redop x count (0, 1, 7, 4097, and 1Mi+3 for a subset) x in place and
// out of place, user memory and narrow-float edge values: worker_cases.cc, matrixCases.
TEST_P(MultiDaemonMatrixTest, EveryCaseMatchesTheReferenceOnEveryRank) {
  runClusterJob("matrix", GetParam().daemonOfRank, {"--mode", "matrix", "--seed", "7"},
                kMatrixTimeout);
}

INSTANTIATE_TEST_SUITE_P(Placements, MultiDaemonMatrixTest,
                         ::testing::Values(Placement{"TwoDaemonsOneRankEach", {0, 1}},
                                           Placement{"TwoDaemonsTwoRanksEach", {0, 0, 1, 1}},
                                           Placement{"ThreeDaemonsOneTwoOne", {0, 1, 1, 2}},
                                           Placement{"FourDaemonsOneRankEach", {0, 1, 2, 3}},
                                           // Ranks 0 and 2 on daemon 0, 1 and 3 on daemon 1: every
                                           // rank's ring neighbours live on the other daemon.
                                           Placement{"Interleaved", {0, 1, 0, 1}}),
                         [](const auto& p) { return p.param.name; });

// Every data operation over fp32, bf16, int64 and fp8 e4m3 at 0, 1, 7, 4097 and 1Mi+3 elements in
// both placements (every redop at the small counts, sum at 1Mi+3): worker_multinode.cc. One rank
// per daemon, so that every byte of the large cases crosses between the daemons (a second local
// rank per daemon would double the run time and add nothing the matrix above does not cover).
TEST(MultiDaemonGridTest, EveryOperationOfTheFourDtypesMatchesAtEveryCountIncludingOneMi) {
  runClusterJob("grid", {0, 1}, {"--mode", "grid", "--seed", "11"}, kMatrixTimeout);
}

// Seeded random groups of sends, receives and collectives that each rank posts in its own shuffled
// order; transfers pick random pairs, so most cross daemons and some stay on one.
TEST(MultiDaemonGroupTest, RandomGroupsAcrossDaemonsCompleteWithCorrectData) {
  runClusterJob("groups", {0, 0, 1, 1}, {"--mode", "groups", "--seed", "2024", "--iters", "200"},
                kJobTimeout);
}

// More operations in one group than a daemon keeps in flight per client, with the partner rank on
// the other daemon.
TEST(MultiDaemonGroupTest, GroupLargerThanTheInFlightWindowCompletesAcrossDaemons) {
  runClusterJob("biggroup", {0, 1}, {"--mode", "biggroup", "--seed", "5"}, kJobTimeout);
}

// Zero counts for some peers, only to self, a silent rank, a ring: blocks cross daemons or not.
TEST(MultiDaemonGroupTest, AllToAllVWithZeroCountsDeliversExactlyTheOtherBlocks) {
  runClusterJob("alltoallv", {0, 1, 0, 1}, {"--mode", "alltoallv", "--seed", "31"}, kJobTimeout);
}

// hc_comm_split of a communicator that spans daemons: colors with NOCOLOR ranks, then one color
// with reversed keys (worker_split_mode.cc). The daemons allgather every rank's color and key
// and make the same children; children whose ranks sit on one daemon stay local to it. Ranks
// interleave, so every color spans both daemons or only one depending on the split.
TEST(MultiDaemonSplitTest, SplitOfACrossDaemonCommunicatorMakesWorkingChildren) {
  runClusterJob("split", {0, 1, 0, 1}, {"--mode", "split", "--seed", "77"}, kJobTimeout);
}

TEST(MultiDaemonSplitTest, SplitWithThreeDaemonsMakesWorkingChildren) {
  runClusterJob("split3", {0, 1, 2, 0, 1, 2}, {"--mode", "split", "--seed", "78"}, kJobTimeout);
}

// A collective whose descriptor differs between ranks on different daemons: the daemons compare
// descriptors before running it, so every rank gets the same InvalidArgument naming both
// descriptors, and the next operation fails with it too (no rank runs a different schedule).
class MultiDaemonMismatchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiDaemonMismatchTest, EveryRankGetsTheSameErrorNamingBothDescriptors) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  // One rank per daemon: the daemons, not the local matching, see the mismatch.
  auto job = ClusterJob::start(*cluster, "mismatch-" + GetParam(), {0, 1},
                               {"--mode", "mismatch", "--field", GetParam(), "--watchdog", "30"},
                               &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(30))) << job->report() << cluster->logTails();
  std::string first;
  for (int i = 0; i < job->size(); ++i) {
    SCOPED_TRACE("rank " + std::to_string(i));
    const auto result = findStatusLine(job->proc(i).output(), "result");
    ASSERT_TRUE(result.has_value()) << job->report();
    EXPECT_EQ(result->status, 3 /* InvalidArgument */) << result->text;
    EXPECT_NE(result->text.find("mismatch"), std::string::npos) << result->text;
    if (i == 0) first = result->text;
    EXPECT_EQ(result->text, first) << "ranks got different errors";
    const auto later = findStatusLine(job->proc(i).output(), "later");
    ASSERT_TRUE(later.has_value()) << job->report();
    EXPECT_NE(later->status, 0) << "an operation after the mismatch succeeded";
  }
  if (HasFailure()) ADD_FAILURE() << cluster->logTails();
}

// Ranks 0 and 2 share daemon 0 and disagree there: daemon 0's own matching fails the
// communicator and tells daemon 1. The operation before it completes everywhere (it was about to
// finish on daemon 1 when the failure came), and every rank gets an error for the mismatched one.
TEST(MultiDaemonMismatchTest, LocalMismatchFailsTheOtherDaemonsRanksButNotTheOpBefore) {
  std::string error;
  auto cluster = DaemonCluster::start({}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  for (int round = 0; round < 3; ++round) {
    auto job = ClusterJob::start(*cluster, "local-mismatch-" + std::to_string(round),
                                 {0, 1, 0, 1},
                                 {"--mode", "mismatch", "--field", "count", "--watchdog", "30"},
                                 &error);
    ASSERT_NE(job, nullptr) << error;
    ASSERT_TRUE(job->waitAll(seconds(30))) << job->report() << cluster->logTails();
    for (int i = 0; i < job->size(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + ", rank " + std::to_string(i));
      const auto warmup = findStatusLine(job->proc(i).output(), "warmup");
      const auto result = findStatusLine(job->proc(i).output(), "result");
      ASSERT_TRUE(warmup.has_value() && result.has_value()) << job->report();
      EXPECT_EQ(warmup->status, 0) << warmup->text;
      EXPECT_NE(result->status, 0) << "the mismatched operation succeeded";
      if (i % 2 == 0) {
        EXPECT_NE(result->text.find("mismatch"), std::string::npos) << result->text;
      }
    }
  }
  if (HasFailure()) ADD_FAILURE() << cluster->logTails();
}

INSTANTIATE_TEST_SUITE_P(Fields, MultiDaemonMismatchTest,
                         ::testing::Values("count", "dtype", "redop", "root", "op"));

}  // namespace
}  // namespace hc::integ
