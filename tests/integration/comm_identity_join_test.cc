// The transfers inside one communicator and the hooks of the join. A transfer's tag folded
// (src * nranks + dst) into 15 bits, so with 200 ranks the pairs 0->101 and 164->69 shared one;
// the test here runs those two pairs (hc_identity_worker, identity_worker.h) and expects their
// data right. Then the join: a daemon that acts late on the root's rank table, and daemons of
// different wire versions, which must refuse each other with an error that says why; and a process
// that holds two ranks of a communicator spanning both daemons.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/transport/transport.h"
#include "hetero_comm/hc.h"
#include "tests/integration/identity_workers.h"
#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 200 ranks, rank r on daemon r % 2, a process each. Ranks 0 and 164 (daemon 0) send 7 elements
// each to 101 and 69 (daemon 1), transfers to which the old 15-bit fold of src * 200 + dst gave one
// tag. Go files order the posts: 0 sends, then 164, so that both sends are under way before either
// receive; then 69 receives, then 101, the opposite order. The other ranks only init and destroy.
TEST(CommIdentityTest, TransfersOfPairsThatSharedATagKeepTheirOwnData) {
  constexpr int kRanks = 200;
  static_assert(((0 * kRanks + 101) & 0x7fff) == ((164 * kRanks + 69) & 0x7fff));
  ClusterOptions options;
  // 100 clients per daemon that move 28 bytes each: small segments rather than the default 1 GiB.
  options.daemonArgs = {"--segment-bytes", "4MiB"};
  auto s = startCluster(options);
  ASSERT_FALSE(s.id.empty()) << s.error;
  auto goOf = [&](int r) { return s.cluster->dir() + "/go-" + std::to_string(r); };
  const std::vector<std::string> common = {
      "--mode",     "p2p", "--id",        s.id,           "--nranks", std::to_string(kRanks),
      "--base",     "1",   "--transfers", "0:101,164:69", "--counts", "7",
      "--watchdog", "60"};
  Workers w(*s.cluster);
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRanks; ++r) {
    std::vector<std::string> own = {"--rank", std::to_string(r)};
    if (r == 164 || r == 69 || r == 101) own.insert(own.end(), {"--go-file", goOf(r)});
    ASSERT_TRUE(w.start("rank" + std::to_string(r), r % 2, concat(common, own), &error)) << error;
  }
  // Rank 0 sends once every rank has joined.
  ASSERT_TRUE(w["rank0"].waitForOutput("sent", seconds(60))) << w.report() << s.cluster->logTails();
  touch(goOf(164));
  ASSERT_TRUE(w["rank164"].waitForOutput("sent", kReadyTimeout)) << w.report();
  touch(goOf(69));
  ASSERT_TRUE(w["rank69"].waitForOutput("receiving", kReadyTimeout)) << w.report();
  touch(goOf(101));
  w.expectAllSucceed(kJobTimeout);
  RecordProperty("milliseconds", static_cast<int>(std::chrono::duration_cast<milliseconds>(
                                                      std::chrono::steady_clock::now() - start)
                                                      .count()));
  expectCleanStop(*s.cluster);
}

// Rank 0 (daemon 0) sends 7 elements to rank 1 (daemon 1) and destroys its handle; rank 1 posts
// its receive only once daemon 1 has heard daemon 0's goodbye (the go file waits for that log
// line). The receive takes what was sent before the sender left; a second receive from rank 0,
// which sent once, fails at once with the reason instead of waiting for a send that never comes.
TEST(CommIdentityTest, ReceivePostedAfterTheSendersDaemonSaidGoodbyeTakesWhatWasSent) {
  auto s = startCluster();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::string go = s.cluster->dir() + "/go-1";
  const std::vector<std::string> common = {"--mode",   "p2p",        "--id",     s.id,
                                           "--nranks", "2",          "--counts", "7",
                                           "--transfers", "0:1",     "--watchdog", "30"};
  Workers w(*s.cluster);
  std::string error;
  ASSERT_TRUE(w.start("rank0", 0, concat(common, {"--rank", "0"}), &error)) << error;
  ASSERT_TRUE(w.start("rank1", 1,
                      concat(common, {"--rank", "1", "--go-file", go, "--recv-again", "1",
                                      "--expect-failure", "1"}),
                      &error))
      << error;
  ASSERT_TRUE(w["rank0"].waitExit(kJobTimeout)) << w.report() << s.cluster->logTails();
  EXPECT_EQ(w.problemsOf("rank0"), "") << w.report();
  ASSERT_TRUE(s.cluster->daemon(1).process().waitForOutput(
      "destroyed their handles on their daemon", kReadyTimeout))
      << s.cluster->logTails();
  touch(go);
  ASSERT_TRUE(w["rank1"].waitExit(kJobTimeout)) << w.report() << s.cluster->logTails();
  const std::string out = w["rank1"].output();
  EXPECT_TRUE(hasLine(out, "#wrong 0")) << w.report();
  const auto result = findStatusLine(out, "result");
  ASSERT_TRUE(result.has_value()) << w.report();
  EXPECT_NE(result->status, HC_OK) << w.report();
  EXPECT_EQ(result->text.rfind("second receive from 0", 0), 0u) << w.report();
  EXPECT_NE(result->text.find("destroyed its handle"), std::string::npos) << w.report();
  expectCleanStop(*s.cluster);
}

// Options under which daemon 1, and the workers against it, run with the environment variable
// assignment (a test hook's NAME=VALUE).
ClusterOptions withEnvOnDaemon1(const std::string& assignment) {
  ClusterOptions options;
  options.commandPrefix = [assignment](int d) {
    return d == 1 ? std::vector<std::string>{"/usr/bin/env", assignment}
                  : std::vector<std::string>{};
  };
  return options;
}

// Daemon 1 acts on the root's rank table 1.5 s late (test hook HC_TEST_JOIN_ANSWER_DELAY_MS), so
// rank 0 posts its first allreduce, and daemon 0 sends to daemon 1, before daemon 1 has formed
// the communicator: its messages must wait for it, not be lost or taken for another's.
TEST(CommIdentityTest, FirstAllreduceIsRightWhenOneDaemonFormsTheCommunicatorLate) {
  constexpr int kDelayMs = 1500;
  auto s =
      startCluster(withEnvOnDaemon1("HC_TEST_JOIN_ANSWER_DELAY_MS=" + std::to_string(kDelayMs)));
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> common = {
      "--mode", "collectives", "--id", s.id, "--nranks", "2", "--iters", "3", "--watchdog", "30"};
  Workers w(*s.cluster);
  ASSERT_EQ(w.startRanks(2, common), "");
  w.expectAllSucceed(kJobTimeout);
  // Else the hook did nothing, and neither did this test.
  long long initMs = -1;
  const std::string out = w["p1"].output();
  const size_t at = out.find("init ms=");
  if (at != std::string::npos) initMs = std::atoll(out.c_str() + at + 8);
  EXPECT_GE(initMs, kDelayMs - 100) << "rank 1's init was not delayed by daemon 1\n" << w.report();
  expectCleanStop(*s.cluster);
}

// 4 ranks over both daemons, two per process: p0 holds ranks 0 and 2 against daemon 0 (the root),
// p1 ranks 1 and 3 against daemon 1. Each process names the root once per rank, and its daemon
// may read both namings before either CommInit: when a daemon kept one root per key, the first
// CommInit took it and the second rank began a communicator of that daemon alone, so the root
// waited for the rank until the init timed out (10 s here, not the default 2 minutes). Every rank
// of a process posts each operation before any is waited for.
TEST(CommIdentityTest, TwoRanksOfASpanningCommunicatorInOneProcessJoinAcrossDaemons) {
  auto s = startCluster();
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> common = {
      "--mode", "collectives", "--id", s.id, "--nranks", "4", "--ops", "allreduce,broadcast",
      // The default counts twice, each rank the broadcast's root twice.
      "--iters", "8", "--init-timeout-ms", "10000", "--watchdog", "30"};
  Workers w(*s.cluster);
  std::string error;
  ASSERT_TRUE(w.start("p0", 0, concat(common, {"--ranks", "0,2"}), &error)) << error;
  ASSERT_TRUE(w.start("p1", 1, concat(common, {"--rank", "1", "--rank", "3"}), &error)) << error;
  w.expectAllSucceed(kJobTimeout);
  expectFormedAcrossBoth(*s.cluster, 1);
  expectCleanStop(*s.cluster);
}

// The lines of text (rank errors, daemon log messages without their time and level) that
// mention the wire version.
std::vector<std::string> wireVersionMentions(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    // "[2024-01-01 10:00:00.000] [warning] message": the message alone, so that the digits of the
    // time cannot pass for versions.
    if (line.rfind("[", 0) == 0) {
      const size_t level = line.find("] [");
      const size_t message = level == std::string::npos ? level : line.find("] ", level + 3);
      if (message != std::string::npos) line = line.substr(message + 2);
    }
    if (line.find("wire version") != std::string::npos) out.push_back(line);
  }
  return out;
}

// Daemon 1 claims wire version 1 (test hook HC_TEST_WIRE_VERSION) against daemon 0's own: the root
// refuses its join, and every rank's init fails within the init timeout, with an error (the
// rank's, or failing that a daemon's log) that names the wire version and both versions.
TEST(CommIdentityTest, DaemonsOfDifferentWireVersionsRefuseEachOtherAtJoin) {
  constexpr int kInitTimeoutMs = 3000;
  auto s = startCluster(withEnvOnDaemon1("HC_TEST_WIRE_VERSION=1"));
  ASSERT_FALSE(s.id.empty()) << s.error;
  const std::vector<std::string> common = {"--mode",
                                           "collectives",
                                           "--id",
                                           s.id,
                                           "--nranks",
                                           "2",
                                           "--iters",
                                           "1",
                                           "--init-timeout-ms",
                                           std::to_string(kInitTimeoutMs),
                                           "--watchdog",
                                           "30"};
  Workers w(*s.cluster);
  ASSERT_EQ(w.startRanks(2, common), "");
  std::vector<std::string> mentions;
  for (const char* name : {"p0", "p1"}) {
    SCOPED_TRACE(name);
    // The init timeout, and time for the processes to start and the failure to travel.
    ASSERT_TRUE(w[name].waitExit(milliseconds(kInitTimeoutMs) + seconds(10)))
        << "init did not fail within its timeout\n"
        << w.report() << s.cluster->logTails();
    const std::string out = w[name].output();
    EXPECT_NE(out.find("init failed"), std::string::npos) << w.report();
    const auto result = findStatusLine(out, "result");
    ASSERT_TRUE(result.has_value()) << w.report();
    EXPECT_NE(result->status, HC_OK) << w.report();
    for (const std::string& m : wireVersionMentions(result->text)) mentions.push_back(m);
  }
  for (int d = 0; d < 2; ++d) {
    for (const std::string& m : wireVersionMentions(s.cluster->daemon(d).log()))
      mentions.push_back(m);
  }
  const std::string own = std::to_string(transport::kWireVersion);
  bool named = false;
  for (const std::string& m : mentions) {
    named = named || (m.find('1') != std::string::npos && m.find(own) != std::string::npos);
  }
  EXPECT_TRUE(named) << "no error names the wire version and both versions 1 and " << own << "\n"
                     << w.report() << s.cluster->logTails();
  expectCleanStop(*s.cluster);
}

}  // namespace
}  // namespace hc::integ
