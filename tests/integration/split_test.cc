// hc_comm_split: several colors and NOCOLOR ranks, the new ranks ordered by key (ties by parent
// rank), verified collectives and ring exchanges on every new communicator at the same time, the
// parent still working afterwards, and a second split with reversed keys.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/job_expectations.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

class SplitTest : public ::testing::TestWithParam<int> {};

TEST_P(SplitTest, EveryColorGetsAWorkingCommunicatorAndNoColorGetsNone) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "split", nranks,
                            {"--mode", "split", "--seed", "77", "--watchdog", "30"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *daemon, std::chrono::seconds(90));

  // The worker's rule (worker_split_mode.cc): ranks 2, 5, ... take no color; the others
  // alternate between colors 0 and 1. Each rank printed its place in the new communicator.
  for (int r = 0; r < nranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string out = job->rank(r).output();
    if (r % 3 == 2) {
      EXPECT_NE(out.find("split rank=-1 size=0\n"), std::string::npos);
    } else {
      EXPECT_NE(out.find("split rank="), std::string::npos);
    }
  }
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// 4 ranks: color 0 = {0}, color 1 = {3, 1} (reversed keys), rank 2 none.
// 5 ranks: color 0 = {0, 4}, color 1 = {3, 1}, rank 2 none.
INSTANTIATE_TEST_SUITE_P(Ranks, SplitTest, ::testing::Values(4, 5),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
