// Every collective x dtype x redop x count x placement on one communicator of N worker processes,
// each verifying its results against a reference computed from every rank's seeds.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

// Generous for 4 ranks on 2 cores; a hang shows up as this timeout, not as a stuck ctest.
constexpr auto kMatrixTimeout = std::chrono::seconds(150);

class MatrixTest : public ::testing::TestWithParam<int> {};

TEST_P(MatrixTest, EveryCaseMatchesTheReferenceOnEveryRank) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "matrix", nranks, {"--mode", "matrix", "--seed", "7"}, &error);
  ASSERT_NE(job, nullptr) << error;

  bool finished = job->waitAll(kMatrixTimeout);
  EXPECT_TRUE(finished) << "ranks still running after " << kMatrixTimeout.count() << " s";
  for (int r = 0; r < nranks; ++r) {
    std::string out = job->rank(r).output();
    EXPECT_EQ(job->rank(r).exitCode(), 0) << "rank " << r;
    EXPECT_NE(out.find("\n#wrong 0\n"), std::string::npos) << "rank " << r;
    EXPECT_EQ(out.find("ERROR "), std::string::npos) << "rank " << r;
  }
  if (HasFailure()) {
    ADD_FAILURE() << job->report() << "\n--- daemon log tail:\n" << daemon->logTail();
  }
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Ranks, MatrixTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
