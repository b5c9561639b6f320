// hc_comm_abort while a group or a split is pending: the ranks that wait on it get an error within
// 5 s (their group's requests, or their hc_comm_split, return), the rank that joins late fails at
// once, nothing hangs, and the daemon releases everything of the clients once they are gone. The
// aborter is either the absent rank (which never posted) or a waiting rank, from a second thread
// while its main thread is blocked in the same communicator.
#include <gtest/gtest.h>

#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;
constexpr int kAbsent = kRanks - 1;  // the worker's rule: the last rank never posts
constexpr auto kDeadline = seconds(5);

enum class Aborter { AbsentRank, WaitingRank };

using Param = std::tuple<std::string, Aborter>;

class AbortTest : public ::testing::TestWithParam<Param> {};

bool isFailure(int status) {
  return status == 6 /* HC_UNAVAILABLE */ || status == 8 /* HC_REMOTE_ERROR */;
}

TEST_P(AbortTest, PendingOperationsFailOnEveryRankWithinFiveSeconds) {
  const auto& [phase, who] = GetParam();
  const int aborter = who == Aborter::AbsentRank ? kAbsent : 0;
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const int baseline = daemon->settledFdCount();
  ASSERT_GT(baseline, 0);
  const std::string goFile = daemon->dir() + "/go";
  auto job = RankJob::start(*daemon, "abort-" + phase, kRanks,
                            {"--mode", "abort", "--phase", phase, "--go-file", goFile, "--aborter",
                             std::to_string(aborter), "--watchdog", "30"},
                            &error);
  ASSERT_NE(job, nullptr) << error;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(job->rank(r).waitForOutput(r == kAbsent ? "idle" : "posted", seconds(20)))
        << "rank " << r << " never got to its pending operation\n"
        << job->report();
  }
  // Long enough for the waiting ranks to be blocked in hc_wait / hc_comm_split.
  std::this_thread::sleep_for(milliseconds(300));

  auto abortAt = Clock::now();
  std::ofstream(goFile).put('\n');
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // The absent rank, unless it aborts, joins 0.5 s after the abort and must fail at once.
    const char* tag = r != kAbsent ? "result" : (r == aborter ? "aborted" : "later");
    auto limit = kDeadline + (r == kAbsent ? milliseconds(500) : milliseconds(0));
    auto left = std::chrono::duration_cast<milliseconds>(limit - (Clock::now() - abortAt));
    bool seen = job->rank(r).waitForOutput(std::string(tag) + " status=", left);
    auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - abortAt).count();
    ASSERT_TRUE(seen) << "no " << tag << " line within " << limit.count() << " ms of the abort"
                      << " (waited " << tookMs << " ms)\n"
                      << job->report() << "\n--- daemon:\n"
                      << daemon->logTail();
    auto line = findStatusLine(job->rank(r).output(), tag);
    ASSERT_TRUE(line.has_value());
    if (std::string(tag) == "aborted") {
      EXPECT_EQ(line->status, 0) << "hc_comm_abort failed: " << line->text;
    } else {
      EXPECT_TRUE(isFailure(line->status))
          << tag << " status " << line->status << ": " << line->text;
      EXPECT_FALSE(line->text.empty() || line->text == "(null)") << "an error without a message";
    }
  }
  if (aborter != kAbsent) {
    auto line = findStatusLine(job->rank(aborter).output(), "aborted");
    ASSERT_TRUE(line.has_value()) << job->report();
    EXPECT_EQ(line->status, 0) << line->text;
  }
  EXPECT_TRUE(job->waitAll(seconds(10))) << "a rank did not exit after its error\n"
                                         << job->report();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(job->rank(r).exitCode(), 0) << job->report();

  // Every client is gone: the aborted group or split must not keep any of their descriptors.
  int fds = daemon->waitForFdCount(baseline, seconds(5));
  EXPECT_EQ(fds, baseline) << "daemon descriptors did not return to the baseline\n"
                           << daemon->logTail();
  Status serves = checkDaemonServes(daemon->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << daemon->logTail();
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(PendingGroupAndSplit, AbortTest,
                         ::testing::Combine(::testing::Values("group", "split"),
                                            ::testing::Values(Aborter::AbsentRank,
                                                              Aborter::WaitingRank)),
                         [](const auto& p) {
                           return std::get<0>(p.param) +
                                  (std::get<1>(p.param) == Aborter::AbsentRank
                                       ? "_AbsentRankAborts"
                                       : "_WaitingRankAborts");
                         });

}  // namespace
}  // namespace hc::integ
