// Every operation x dtype x redop x count x placement (and plain heap memory, narrow-float edge
// values) on one communicator of N worker processes, each verifying its results against a
// reference computed from every rank's seeds.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/job_expectations.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

// Generous for 4 ranks on 2 cores; a hang shows up as this timeout, not as a stuck ctest.
constexpr auto kMatrixTimeout = std::chrono::seconds(120);

class MatrixTest : public ::testing::TestWithParam<int> {};

TEST_P(MatrixTest, EveryCaseMatchesTheReferenceOnEveryRank) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "matrix", nranks, {"--mode", "matrix", "--seed", "7"}, &error);
  ASSERT_NE(job, nullptr) << error;

  expectJobSucceeds(*job, *daemon, kMatrixTimeout);
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Ranks, MatrixTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
