// A rank killed mid-collective: the other ranks of its communicator fail with Unavailable within
// 5 s, another communicator running at the same time is untouched, and the daemon releases every
// descriptor of the dead client.
#include <gtest/gtest.h>
#include <signal.h>

#include <ostream>
#include <string>
#include <thread>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kVictim = 1;
constexpr auto kSurvivorDeadline = seconds(5);

// Looping: killed while collectives are in flight. Stalled: killed while the other ranks wait in
// hc_wait for an op it never posts.
enum class Victim { Looping, Stalled };

void PrintTo(Victim v, std::ostream* os) { *os << (v == Victim::Looping ? "Looping" : "Stalled"); }

class ClientKilledTest : public ::testing::TestWithParam<Victim> {};

TEST_P(ClientKilledTest, SurvivorsFailFastAndOtherCommunicatorsContinue) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const int baseline = daemon->settledFdCount();
  ASSERT_GT(baseline, 0);

  auto other = RankJob::start(*daemon, "other", 2,
                              {"--mode", "loop", "--seconds", "4", "--count", "16384"}, &error);
  ASSERT_NE(other, nullptr) << error;
  const bool stall = GetParam() == Victim::Stalled;
  auto job = RankJob::start(*daemon, "victim", 3, {"--mode", "loop", "--count", "262144"}, &error,
                            [&](int rank) -> std::vector<std::string> {
                              if (stall && rank == kVictim) return {"--stall-after", "5"};
                              return {};
                            });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("progress", seconds(20))) << job->report();
  ASSERT_TRUE(other->waitAllOutput("progress", seconds(20))) << other->report();
  if (stall) {
    ASSERT_TRUE(job->rank(kVictim).waitForOutput("stalled", seconds(20))) << job->report();
    // Long enough for the survivors to be blocked in hc_wait.
    std::this_thread::sleep_for(milliseconds(300));
  }

  auto killedAt = Clock::now();
  job->rank(kVictim).sendSignal(SIGKILL);
  for (int r : {0, 2}) {
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    auto left = kSurvivorDeadline - (Clock::now() - killedAt);
    bool failed = job->rank(r).waitForOutput("result status=",
                                             std::chrono::duration_cast<milliseconds>(left));
    auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count();
    ASSERT_TRUE(failed) << "no error within 5 s of the kill (waited " << tookMs << " ms)\n"
                        << job->report() << "\n--- daemon:\n"
                        << daemon->logTail();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->status, 6 /* HC_UNAVAILABLE */) << result->text;
    EXPECT_FALSE(result->text.empty());
    EXPECT_TRUE(job->rank(r).waitExit(seconds(5))) << "survivor did not exit after its error";
    EXPECT_EQ(job->rank(r).exitCode(), 3);
  }

  ASSERT_TRUE(other->waitAll(seconds(60))) << other->report();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("other communicator rank " + std::to_string(r));
    EXPECT_EQ(other->rank(r).exitCode(), 0) << other->report();
    auto result = findStatusLine(other->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value()) << other->report();
    EXPECT_EQ(result->status, 0) << result->text;
  }

  // Every client is gone now: the daemon must hold no descriptor of any of them.
  ASSERT_TRUE(job->waitAll(seconds(10))) << job->report();
  int fds = daemon->waitForFdCount(baseline, seconds(5));
  EXPECT_EQ(fds, baseline) << "daemon descriptors did not return to the baseline\n"
                           << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Victims, ClientKilledTest,
                         ::testing::Values(Victim::Looping, Victim::Stalled), [](const auto& p) {
                           return p.param == Victim::Looping ? "Looping" : "Stalled";
                         });

}  // namespace
}  // namespace hc::integ
