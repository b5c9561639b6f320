// SIGTERM with idle clients connected: the daemon drains and exits 0, and each client's next call
// fails cleanly with Unavailable instead of hanging.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

TEST(SigtermTest, DaemonExitsZeroAndIdleClientsFailCleanly) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string goFile = daemon->dir() + "/go";
  auto job = RankJob::start(*daemon, "idle", 2, {"--mode", "idle", "--go-file", goFile}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("idle", seconds(20))) << job->report();

  EXPECT_EQ(daemon->stop(seconds(10)), 0) << daemon->process().describeEnd() << "\n"
                                          << daemon->logTail();
  std::ofstream(goFile).put('\n');
  for (int r = 0; r < job->nranks(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(job->rank(r).waitForOutput("result status=", seconds(5))) << job->report();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->status, 6 /* HC_UNAVAILABLE */) << result->text;
    EXPECT_FALSE(result->text.empty());
    EXPECT_TRUE(job->rank(r).waitExit(seconds(5))) << job->report();
    EXPECT_EQ(job->rank(r).exitCode(), 3) << job->report();
  }
}

// Ops that wait for a rank which never posts cannot drain: shutdown fails them (Unavailable)
// rather than waiting forever, and the daemon still exits 0.
TEST(SigtermTest, DaemonExitsZeroAndFailsOpsThatWaitForAStalledRank) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "blocked", 3, {"--mode", "loop", "--count", "4096"}, &error,
                            [](int rank) -> std::vector<std::string> {
                              if (rank == 2) return {"--stall-after", "3"};
                              return {};
                            });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->rank(2).waitForOutput("stalled", seconds(20))) << job->report();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  EXPECT_EQ(daemon->stop(seconds(10)), 0) << daemon->process().describeEnd() << "\n"
                                          << daemon->logTail();
  for (int r : {0, 1}) {
    SCOPED_TRACE("waiting rank " + std::to_string(r));
    ASSERT_TRUE(job->rank(r).waitForOutput("result status=", seconds(5))) << job->report();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->status, 6 /* HC_UNAVAILABLE */) << result->text;
    EXPECT_TRUE(job->rank(r).waitExit(seconds(5))) << job->report();
  }
}

// Without clients the drain is trivial; the exit code must still be 0.
TEST(SigtermTest, IdleDaemonExitsZero) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  EXPECT_EQ(daemon->stop(seconds(10)), 0) << daemon->logTail();
}

}  // namespace
}  // namespace hc::integ
