// The small-operation area (hc_config_t host_small_ops): communicators whose ranks all asked for
// it combine small collectives on host memory among themselves, and everything else goes to the
// daemon as before. Jobs of hc_small_ops_worker processes (small_ops_worker.h) against one real
// daemon per case, with a simulated GPU and /metrics: every op, dtype and reduction at the edges
// of the slot; small and large allreduces chained in issue order; one rank taking the daemon
// (sim memory, a group) or not asking for the area; disagreeing descriptors; a peer that exits,
// is killed or aborts while the others wait in the area; a thousand tiny allreduces. The
// daemon's hetero_comm_collectives_total shows which operations went through it: the area's
// never do. The AsyncError cases poll hc_comm_get_async_error only, as a framework's watchdog
// does: it moves the area's small ops too.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/job_expectations.h"
#ifdef HC_HCCTL_PATH
#include "tests/integration/hcctl_run.h"
#endif
#include "tests/integration/metrics_scrape.h"
#include "tests/integration/rank_job.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr auto kJobTimeout = seconds(120);
// How long a survivor may wait in the area once its peer is gone.
constexpr auto kPeerLostDeadline = seconds(10);

// One daemon with a simulated GPU (the mixed-path case's device memory) and /metrics.
struct Daemon {
  std::unique_ptr<DaemonProcess> process;
  int metricsPort = 0;
};

Daemon startDaemon(std::string* error) {
  Daemon d;
  d.process = DaemonProcess::start(
      {"--set", "devices.sim.nvidia=1", "--set", "metrics.listen=127.0.0.1:0"}, error);
  if (d.process != nullptr) {
    d.metricsPort = loggedPort(*d.process, "metrics listening on http://127.0.0.1:");
  }
  return d;
}

// The ranks of one communicator, each an hc_small_ops_worker process.
struct SmallOpsJob {
  static std::unique_ptr<RankJob> start(const DaemonProcess& daemon, const std::string& name,
                                        int nranks, const std::vector<std::string>& args,
                                        std::string* error,
                                        const RankJob::PerRankArgs& perRank = nullptr) {
    return RankJob::startWorker(HC_SMALL_OPS_WORKER_PATH, daemon, name, nranks, args, error,
                                perRank);
  }
};

// Every rank exited 0 having printed "#wrong 0" and no ERROR, WRONG or HUNG line.
// The number after "<key> " at the start of a line of output; -1 when there is none.
long long printedNumber(const std::string& output, const std::string& key) {
  for (size_t pos = output.find(key + " "); pos != std::string::npos;
       pos = output.find(key + " ", pos + 1)) {
    if (pos != 0 && output[pos - 1] != '\n') continue;
    return std::atoll(output.c_str() + pos + key.size() + 1);
  }
  return -1;
}

// The operations the daemon finished with status ok (every op, every dtype; one per rank), from
// its /metrics.
double daemonCollectivesOk(int port) {
  std::istringstream lines(scrapeMetrics(port));
  double total = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("hetero_comm_collectives_total{")) continue;
    if (line.find("status=\"ok\"") == std::string::npos) continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

// ---- 1. every op x dtype x redop x count x placement x memory ----

class SmallOpsMatrixTest : public ::testing::TestWithParam<int> {};

TEST_P(SmallOpsMatrixTest, EveryOpDtypeRedopAndCountMatchesTheReference) {
  const int nranks = GetParam();
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  ASSERT_GT(d.metricsPort, 0) << d.process->logTail();
  auto job = SmallOpsJob::start(*d.process, "matrix", nranks, {"--mode", "matrix"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *d.process, kJobTimeout);
  if (HasFailure()) return;
  // Only the cases one element past the slot reached the daemon.
  const long long daemonCases = printedNumber(job->rank(0).output(), "daemon-cases");
  ASSERT_GT(daemonCases, 0) << job->report();
  EXPECT_EQ(daemonCollectivesOk(d.metricsPort), static_cast<double>(nranks * daemonCases))
      << scrapeMetrics(d.metricsPort);
  const std::string out = job->rank(0).output();
  const size_t at = out.find("\ncases ");
  if (at != std::string::npos) std::cout << out.substr(at + 1, out.find('\n', at + 1) - at);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SmallOpsMatrixTest, ::testing::Values(2, 3),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

// ---- 2. small and large allreduces, chained, in issue order ----

class SmallOpsOrderTest : public ::testing::TestWithParam<int> {};

TEST_P(SmallOpsOrderTest, ChainedSmallAndLargeAllreducesFollowIssueOrder) {
  const int nranks = GetParam();
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  ASSERT_GT(d.metricsPort, 0) << d.process->logTail();
  auto job = SmallOpsJob::start(*d.process, "chain", nranks,
                                {"--mode", "chain", "--iters", "200", "--seed", "7"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *d.process, kJobTimeout);
  if (HasFailure()) return;
  const long long large = printedNumber(job->rank(0).output(), "large");
  ASSERT_GT(large, 0) << job->report();
  EXPECT_EQ(daemonCollectivesOk(d.metricsPort), static_cast<double>(nranks * large))
      << "the 8-byte allreduces must not reach the daemon, the 1 MiB ones must\n"
      << scrapeMetrics(d.metricsPort);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SmallOpsOrderTest, ::testing::Values(2, 3),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

// ---- 3. one rank on another path: sim memory, a group, or no area at all ----

class SmallOpsMixedPathTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(SmallOpsMixedPathTest, ResultsAreRightWhicheverPathEachRankTakes) {
  // Not a structured binding: clang 14 (the sanitizer builds) cannot capture one in a lambda.
  const int nranks = std::get<0>(GetParam());
  const bool oneOptsOut = std::get<1>(GetParam());
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  ASSERT_GT(d.metricsPort, 0) << d.process->logTail();
  auto job = SmallOpsJob::start(*d.process, "mixed", nranks, {"--mode", "mixed"}, &error,
                                [&](int rank) -> std::vector<std::string> {
                                  if (oneOptsOut && rank == 1) return {"--small-ops", "0"};
                                  return {};
                                });
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *d.process, kJobTimeout);
  if (HasFailure()) return;
  const std::string out = job->rank(0).output();
  const long long ops = printedNumber(out, "ops");
  const size_t at = out.find("daemon-ops ");
  ASSERT_TRUE(ops > 0 && at != std::string::npos) << out;
  const long long daemonOps = std::atoll(out.c_str() + at + 11);
  // Without an area every collective takes the daemon; with one, the steps where a rank did.
  EXPECT_EQ(daemonCollectivesOk(d.metricsPort),
            static_cast<double>(nranks * (oneOptsOut ? ops : daemonOps)))
      << scrapeMetrics(d.metricsPort);
}

INSTANTIATE_TEST_SUITE_P(Paths, SmallOpsMixedPathTest,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()),
                         [](const auto& p) {
                           return "ranks" + std::to_string(std::get<0>(p.param)) +
                                  (std::get<1>(p.param) ? "_Rank1WithoutArea" : "_AllAskForArea");
                         });

// ---- 4. disagreeing descriptors ----

class SmallOpsMismatchTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SmallOpsMismatchTest, EveryRankFailsWithTheSameMismatchError) {
  const auto& [variant, nranks] = GetParam();
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  auto job = SmallOpsJob::start(*d.process, "mismatch-" + variant, nranks,
                                {"--mode", "mismatch", "--variant", variant}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(60))) << "hung\n"
                                         << job->report() << "\n--- daemon:\n"
                                         << d.process->logTail();
  std::string firstText;
  for (int r = 0; r < nranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::string out = job->rank(r).output();
    EXPECT_EQ(job->rank(r).exitCode(), 0);
    auto warmup = findStatusLine(out, "warmup");
    ASSERT_TRUE(warmup.has_value());
    ASSERT_EQ(warmup->status, 0) << warmup->text;
    auto result = findStatusLine(out, "result");
    auto later = findStatusLine(out, "later");
    ASSERT_TRUE(result.has_value() && later.has_value());
    EXPECT_NE(result->status, 0) << "the mismatched allreduce succeeded";
    EXPECT_NE(result->status, 7 /* HC_TIMEOUT: the worker gave up waiting */) << result->text;
    EXPECT_NE(result->text.find("mismatch"), std::string::npos) << result->text;
    if (r == 0) firstText = result->text;
    EXPECT_EQ(result->text, firstText) << "ranks saw different errors";
    EXPECT_NE(later->status, 0) << "an allreduce after the mismatch succeeded";
    std::cout << "rank " << r << ": " << result->status << " " << result->text << "\n";
  }
  if (HasFailure()) ADD_FAILURE() << job->report() << "\n--- daemon:\n" << d.process->logTail();
  job.reset();
  EXPECT_EQ(d.process->stop(), 0) << d.process->logTail();
}

std::string variantName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& p) {
  return std::get<0>(p.param) + "_ranks" + std::to_string(std::get<1>(p.param));
}

INSTANTIATE_TEST_SUITE_P(Variants, SmallOpsMismatchTest,
                         ::testing::Combine(::testing::Values("count", "large"),
                                            ::testing::Values(2, 3)),
                         variantName);
// A small op issued without a request moves (is computed, handed over to the daemon, or failed)
// only while its rank calls into the library; a rank that posted first and then only polls
// hc_comm_get_async_error must still hand the mismatched op over, or every rank sits.
INSTANTIATE_TEST_SUITE_P(AsyncError, SmallOpsMismatchTest,
                         ::testing::Combine(::testing::Values("async"), ::testing::Values(2, 3)),
                         variantName);

// ---- 5. a peer exits, is killed or aborts while the others wait in the area ----

class SmallOpsPeerLostTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SmallOpsPeerLostTest, SurvivorsFailInBoundedTimeAndTheDaemonServesOn) {
  const auto& [variant, nranks] = GetParam();
  const int victim = nranks - 1;
  const bool killed = variant.starts_with("kill");
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  const std::string goFile = d.process->dir() + "/go";
  auto job =
      SmallOpsJob::start(*d.process, "peerlost-" + variant, nranks,
                         {"--mode", "peerlost", "--variant", variant, "--go-file", goFile}, &error);
  ASSERT_NE(job, nullptr) << error;
  for (int r = 0; r < victim; ++r) {
    ASSERT_TRUE(job->rank(r).waitForOutput("posted status=", seconds(20)))
        << "rank " << r << " never posted\n"
        << job->report();
  }
  Clock::time_point lostAt;
  if (variant == "exit") {
    ASSERT_TRUE(job->rank(victim).waitExit(seconds(20))) << job->report();
    lostAt = Clock::now();
  } else {
    if (killed) {
      ASSERT_TRUE(job->rank(victim).waitForOutput("idle", seconds(20))) << job->report();
    }
    // Long enough for the survivors to be asleep in the area.
    std::this_thread::sleep_for(milliseconds(300));
    lostAt = Clock::now();
    if (killed) {
      job->rank(victim).sendSignal(SIGKILL);
    } else {
      std::ofstream(goFile).put('\n');
    }
  }
  for (int r = 0; r < victim; ++r) {
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    auto left =
        std::chrono::duration_cast<milliseconds>(kPeerLostDeadline - (Clock::now() - lostAt));
    const bool seen = job->rank(r).waitForOutput("result status=", std::max(left, milliseconds(0)));
    const auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - lostAt).count();
    ASSERT_TRUE(seen) << "no result within " << kPeerLostDeadline.count() << " s (waited " << tookMs
                      << " ms)\n"
                      << job->report() << "\n--- daemon:\n"
                      << d.process->logTail();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value());
    EXPECT_NE(result->status, 0) << "the allreduce of a lost peer succeeded";
    EXPECT_NE(result->status, 7 /* HC_TIMEOUT */) << result->text;
    EXPECT_FALSE(result->text.empty() || result->text == "(null)") << "an error without words";
    std::cout << "rank " << r << " after " << tookMs << " ms: " << result->status << " "
              << result->text << "\n";
  }
  if (killed) {
    EXPECT_TRUE(job->rank(victim).waitExit(seconds(5)));
    EXPECT_EQ(job->rank(victim).termSignal(), SIGKILL);
  } else if (variant == "abort") {
    ASSERT_TRUE(job->rank(victim).waitForOutput("aborted status=", seconds(10))) << job->report();
    auto aborted = findStatusLine(job->rank(victim).output(), "aborted");
    ASSERT_TRUE(aborted.has_value());
    EXPECT_EQ(aborted->status, 0) << aborted->text;
  }
  EXPECT_TRUE(job->waitAll(seconds(30))) << "a rank did not exit after its error\n"
                                         << job->report();
  for (int r = 0; r < nranks; ++r) {
    if (killed && r == victim) continue;
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(job->rank(r).exitCode(), 0);
    if (r == victim) continue;
    auto later = findStatusLine(job->rank(r).output(), "later");
    ASSERT_TRUE(later.has_value());
    EXPECT_NE(later->status, 0) << "an allreduce on the failed communicator succeeded";
  }
  if (HasFailure()) ADD_FAILURE() << job->report() << "\n--- daemon:\n" << d.process->logTail();

  // The daemon serves on: a new communicator of the same kind works.
  ASSERT_TRUE(d.process->running()) << d.process->logTail();
  Status serves = checkDaemonServes(d.process->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << d.process->logTail();
  auto next = SmallOpsJob::start(*d.process, "after-" + variant, nranks,
                                 {"--mode", "smoke", "--iters", "50"}, &error);
  ASSERT_NE(next, nullptr) << error;
  expectJobSucceeds(*next, *d.process, seconds(60));
  job.reset();
  next.reset();
  EXPECT_EQ(d.process->stop(), 0) << d.process->logTail();
}

#ifdef HC_HCCTL_PATH
// A rank that withholds a small op: hcctl trace names it (the daemon reads the area's counters),
// and the op completes once it joins.
TEST(SmallOpsTraceTest, TraceNamesTheRankThatWithholdsASmallOp) {
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  const std::string goFile = d.process->dir() + "/go";
  auto job =
      SmallOpsJob::start(*d.process, "late", 2,
                         {"--mode", "peerlost", "--variant", "late", "--go-file", goFile}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->rank(1).waitForOutput("idle", seconds(20))) << job->report();
  ASSERT_TRUE(job->rank(0).waitForOutput("posted status=0", seconds(20))) << job->report();
  const std::string admin = d.process->dir() + "/run/hetero-commd-admin.sock";
  HcctlRun comms = hcctl({"--socket", admin, "comms", "--json"}, d.process->dir());
  ASSERT_EQ(comms.exitCode, 0) << comms.output;
  const size_t at = comms.output.find("\"key\": \"");
  ASSERT_NE(at, std::string::npos) << comms.output;
  const std::string key = comms.output.substr(at + 8, 32);
  const HcctlRun trace = hcctl({"--socket", admin, "trace", key}, d.process->dir());
  EXPECT_EQ(trace.exitCode, 0) << trace.output;
  EXPECT_NE(trace.output.find("ranks 1 have not posted it"), std::string::npos) << trace.output;
  std::ofstream(goFile).put('\n');
  EXPECT_TRUE(job->waitAll(seconds(30))) << job->report();
  for (int r = 0; r < 2; ++r) {
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value()) << job->report();
    EXPECT_EQ(result->status, 0) << result->text;
  }
  job.reset();
  EXPECT_EQ(d.process->stop(), 0) << d.process->logTail();
}
#endif

INSTANTIATE_TEST_SUITE_P(Variants, SmallOpsPeerLostTest,
                         ::testing::Combine(::testing::Values("exit", "kill", "abort"),
                                            ::testing::Values(2, 3)),
                         variantName);
// A survivor whose small op, issued without a request, waits on a killed peer reads the failure
// from hc_comm_get_async_error, as it does through the daemon (host_small_ops 0).
INSTANTIATE_TEST_SUITE_P(AsyncError, SmallOpsPeerLostTest,
                         ::testing::Combine(::testing::Values("killasync"),
                                            ::testing::Values(2, 3)),
                         variantName);

// ---- 6. latency smoke: no timing asserted ----

TEST(SmallOpsSmokeTest, ThousandTinyAllreducesCompleteWithoutTheDaemon) {
  std::string error;
  Daemon d = startDaemon(&error);
  ASSERT_NE(d.process, nullptr) << error;
  ASSERT_GT(d.metricsPort, 0) << d.process->logTail();
  auto job =
      SmallOpsJob::start(*d.process, "smoke", 2, {"--mode", "smoke", "--iters", "1000"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *d.process, kJobTimeout);
  if (HasFailure()) return;
  EXPECT_EQ(daemonCollectivesOk(d.metricsPort), 0) << scrapeMetrics(d.metricsPort);
  const std::string out = job->rank(0).output();
  const size_t at = out.find("smoke ops=");
  if (at != std::string::npos) std::cout << out.substr(at, out.find('\n', at) - at) << "\n";
}

}  // namespace
}  // namespace hc::integ
