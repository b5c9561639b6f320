// The daemon killed (SIGKILL) while clients wait: every waiting client returns Unavailable within
// 5 s, from a blocked hc_wait as well as from a busy loop; none hangs.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

TEST(DaemonKilledTest, EveryWaitingClientFailsWithinFiveSeconds) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  // Ranks 0 and 1 end up blocked in hc_wait on rank 2, which stops posting ops.
  auto blocked = RankJob::start(*daemon, "blocked", 3, {"--mode", "loop", "--count", "4096"},
                                &error, [](int rank) -> std::vector<std::string> {
                                  if (rank == 2) return {"--mode", "hang", "--stall-after", "3"};
                                  return {};
                                });
  ASSERT_NE(blocked, nullptr) << error;
  auto busy = RankJob::start(*daemon, "busy", 2, {"--mode", "loop", "--count", "65536"}, &error);
  ASSERT_NE(busy, nullptr) << error;
  ASSERT_TRUE(blocked->rank(2).waitForOutput("stalled", seconds(20))) << blocked->report();
  ASSERT_TRUE(busy->waitAllOutput("progress", seconds(20))) << busy->report();
  std::this_thread::sleep_for(milliseconds(300));

  auto killedAt = Clock::now();
  daemon->kill9();
  std::vector<std::pair<RankJob*, int>> waiting = {
      {blocked.get(), 0}, {blocked.get(), 1}, {busy.get(), 0}, {busy.get(), 1}};
  for (auto [job, r] : waiting) {
    SCOPED_TRACE(job->rank(r).outputPath());
    auto left = std::chrono::duration_cast<milliseconds>(seconds(5) - (Clock::now() - killedAt));
    bool failed = job->rank(r).waitForOutput("result status=", left);
    auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count();
    ASSERT_TRUE(failed) << "no error within 5 s of the daemon's death (waited " << tookMs
                        << " ms)\n"
                        << job->report();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->status, 6 /* HC_UNAVAILABLE */) << result->text;
    EXPECT_TRUE(job->rank(r).waitExit(seconds(5))) << "client did not exit after its error\n"
                                                   << job->report();
    EXPECT_EQ(job->rank(r).exitCode(), 3) << job->report();
  }
}

// A watchdog polling hc_comm_get_async_error on a communicator with nothing outstanding (as
// PyTorch's does between steps) learns of the daemon's death: no completion will tell it.
TEST(DaemonKilledTest, AsyncErrorReportsADeadDaemonWithNothingOutstanding) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "watch", 2, {"--mode", "watchidle", "--count", "1024"},
                            &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("idle", seconds(20))) << job->report();
  auto killedAt = Clock::now();
  daemon->kill9();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job->rank(r).waitForOutput("async status=", seconds(5)))
        << "hc_comm_get_async_error still OK 5 s after the daemon died\n"
        << job->report();
    auto tookMs =
        std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count();
    auto result = findStatusLine(job->rank(r).output(), "async");
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->status, 6 /* HC_UNAVAILABLE */) << result->text;
    EXPECT_LT(tookMs, 2000) << job->report();
  }
}

}  // namespace
}  // namespace hc::integ
