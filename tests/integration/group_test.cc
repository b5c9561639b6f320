// Groups and point-to-point: seeded random groups of sends, receives and collectives that each
// rank posts in its own shuffled order, a group larger than the daemon's in-flight window, and
// alltoallv layouts full of zero counts. One long-lived worker process per rank runs every group
// or case of a test; each verifies its data against values computed from the seeds.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/job_expectations.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

// Each worker also runs a watchdog (no progress for 30 s ends it with "HUNG <what>"), so a
// deadlocked group fails well inside this bound and names the group.
constexpr auto kJobTimeout = seconds(90);

void runJob(const std::string& name, int nranks, std::vector<std::string> args) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  args.insert(args.end(), {"--watchdog", "30"});
  auto job = RankJob::start(*daemon, name, nranks, args, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *daemon, kJobTimeout);
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

class RandomGroupTest : public ::testing::TestWithParam<int> {};

// 40 groups of 1-10 operations: transfers between random pairs (self included, zero counts
// included, any dtype, some in plain heap memory) mixed with collectives; every fourth group
// follows a collective posted outside it and not yet waited for.
TEST_P(RandomGroupTest, EveryGroupCompletesWithCorrectDataWhateverTheOrderRanksPostIn) {
  runJob("groups", GetParam(), {"--mode", "groups", "--seed", "2024", "--iters", "40"});
}

INSTANTIATE_TEST_SUITE_P(Ranks, RandomGroupTest, ::testing::Values(2, 3, 4),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

class BigGroupTest : public ::testing::TestWithParam<int> {};

// 4200 operations in one group: more than the daemon keeps in flight per client (4096) and far
// more than the submission ring holds, so the group can only complete if the client and the
// daemon keep draining a group that is still open.
TEST_P(BigGroupTest, GroupLargerThanTheInFlightWindowCompletes) {
  runJob("biggroup", GetParam(), {"--mode", "biggroup", "--seed", "5"});
}

INSTANTIATE_TEST_SUITE_P(Ranks, BigGroupTest, ::testing::Values(1, 2),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

class AllToAllVTest : public ::testing::TestWithParam<int> {};

// No data at all, only to self, rank 0 silent, a ring, seeded mixes; int32, fp16, fp8, fp64;
// hc_mem_alloc and heap memory. Gaps between blocks must stay untouched.
TEST_P(AllToAllVTest, ZeroCountsForSomePeersDeliverExactlyTheOtherBlocks) {
  runJob("alltoallv", GetParam(), {"--mode", "alltoallv", "--seed", "31"});
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllVTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
