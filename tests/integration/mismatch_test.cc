// Ranks that post disagreeing descriptors for op k: every rank gets the same InvalidArgument with
// the same text naming the mismatch, and the communicator stays failed afterwards.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

class MismatchTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MismatchTest, EveryRankGetsTheSameErrorAndLaterOpsFail) {
  const auto& [field, nranks] = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job =
      RankJob::start(*daemon, "mismatch", nranks, {"--mode", "mismatch", "--field", field}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(std::chrono::seconds(30))) << "hung\n" << job->report();

  std::string firstText;
  for (int r = 0; r < nranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::string out = job->rank(r).output();
    EXPECT_EQ(job->rank(r).exitCode(), 0);
    auto warmup = findStatusLine(out, "warmup");
    ASSERT_TRUE(warmup.has_value());
    ASSERT_EQ(warmup->status, 0) << warmup->text;
    auto result = findStatusLine(out, "result");
    auto later = findStatusLine(out, "later");
    ASSERT_TRUE(result.has_value() && later.has_value());
    EXPECT_EQ(result->status, 3 /* HC_INVALID_ARGUMENT */) << result->text;
    EXPECT_NE(result->text.find("mismatch"), std::string::npos) << result->text;
    if (r == 0) firstText = result->text;
    EXPECT_EQ(result->text, firstText) << "ranks saw different errors";
    EXPECT_NE(later->status, 0) << "an op after the mismatch succeeded";
  }
  if (HasFailure()) ADD_FAILURE() << job->report() << "\n--- daemon:\n" << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Fields, MismatchTest,
                         ::testing::Combine(::testing::Values("count", "dtype", "redop", "root",
                                                              "op"),
                                            ::testing::Values(2, 3)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_ranks" +
                                  std::to_string(std::get<1>(p.param));
                         });

// A ring exchange in one group where rank 0's send disagrees with rank 1's receive (count, or
// dtype): the two ranks of that transfer get InvalidArgument naming the mismatch, and the
// communicator is failed on every rank with that same error (the op after it fails everywhere
// with the same text). Transfers of the group that matched may have completed before.
class TransferMismatchTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TransferMismatchTest, BothEndsGetTheSameErrorAndEveryRankFailsLater) {
  const auto& [field, nranks] = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job =
      RankJob::start(*daemon, "mismatch", nranks, {"--mode", "mismatch", "--field", field}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(std::chrono::seconds(30))) << "hung\n" << job->report();

  std::string firstText, firstLater;
  for (int r = 0; r < nranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::string out = job->rank(r).output();
    EXPECT_EQ(job->rank(r).exitCode(), 0);
    auto warmup = findStatusLine(out, "warmup");
    ASSERT_TRUE(warmup.has_value());
    ASSERT_EQ(warmup->status, 0) << warmup->text;
    auto result = findStatusLine(out, "result");
    auto later = findStatusLine(out, "later");
    ASSERT_TRUE(result.has_value() && later.has_value());
    if (r <= 1) {  // the sender and the receiver of the mismatched transfer
      EXPECT_EQ(result->status, 3 /* HC_INVALID_ARGUMENT */) << result->text;
      EXPECT_NE(result->text.find("mismatch"), std::string::npos) << result->text;
      if (r == 0) firstText = result->text;
      EXPECT_EQ(result->text, firstText) << "the two ends saw different errors";
    }
    EXPECT_EQ(later->status, 3 /* HC_INVALID_ARGUMENT */)
        << "an op after the mismatch: " << later->text;
    EXPECT_NE(later->text.find("mismatch"), std::string::npos) << later->text;
    if (r == 0) firstLater = later->text;
    EXPECT_EQ(later->text, firstLater) << "ranks saw the communicator fail with different errors";
  }
  if (HasFailure()) ADD_FAILURE() << job->report() << "\n--- daemon:\n" << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Fields, TransferMismatchTest,
                         ::testing::Combine(::testing::Values("sendcount", "senddtype"),
                                            ::testing::Values(2, 3)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_ranks" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace hc::integ
