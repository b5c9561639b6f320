// Forming a communicator across daemons when something is wrong: two ranks claim one rank, a rank
// never comes, a daemon holds another cluster token, the id names a root where nothing listens or
// a key nobody else uses. Every rank must fail hc_comm_init_rank with the right code within the
// join deadline (comm.init_timeout_ms, 3 s here) plus slack, never hang; and the daemons must go
// on serving new communicators. Daemons talk over UCX tcp,self as on separate nodes (see
// multi_daemon.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/multi_daemon.h"
#include "tests/integration/rank_job.h"
#include "tests/support/hex.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kInitTimeoutMs = 3000;
// Deadline plus room for process start-up and a loaded CI machine.
constexpr auto kFailWithin = milliseconds(kInitTimeoutMs) + seconds(7);

// hc_status_t values the workers print (hetero_comm/hc.h).
constexpr int kInvalidArgument = 3;
constexpr int kPermissionDenied = 5;
constexpr int kTimeout = 7;

ClusterOptions withInitTimeout(int daemons) {
  ClusterOptions o;
  o.daemons = daemons;
  o.daemonArgs = {"--set", "comm.init_timeout_ms=" + std::to_string(kInitTimeoutMs)};
  return o;
}

// The id's bytes (unique_id.h: magic, version, 16-byte key at 8, address length at 24, address
// from 25), from the hex uniqueIdHex returns and back.
std::vector<uint8_t> fromHex(const std::string& hex) {
  std::vector<uint8_t> id(sizeof(hc_unique_id_t));
  EXPECT_TRUE(test::parseHex(hex, id.data(), id.size())) << "not a unique id: " << hex;
  return id;
}

std::string withRootAddress(const std::string& idHex, const std::string& address) {
  std::vector<uint8_t> id = fromHex(idHex);
  std::fill(id.begin() + 24, id.end(), 0);
  id[24] = static_cast<uint8_t>(address.size());
  std::copy(address.begin(), address.end(), id.begin() + 25);
  return test::toHex(id.data(), id.size());
}

std::string withOtherKey(const std::string& idHex) {
  std::vector<uint8_t> id = fromHex(idHex);
  for (size_t i = 8; i < 24; ++i) id[i] ^= 0x5a;
  return test::toHex(id.data(), id.size());
}

// A TCP port on 127.0.0.1 that is bound (so nobody else takes it) but not listening: connections
// to it are refused. -1 on failure.
int boundButNotListening(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

struct InitOutcome {
  StatusLine result;
  long long ms = 0;  // from the start of the job to the process's exit
};

// Waits for every process of the job to fail init; expects each to exit 3 having printed
// "result status=<n>" and "init failed" within kFailWithin. Fills one outcome per process.
std::vector<InitOutcome> expectEveryInitFails(ClusterJob& job, DaemonCluster& cluster,
                                              Clock::time_point started) {
  std::vector<InitOutcome> outcomes(static_cast<size_t>(job.size()));
  // Poll them all, so that each one's time is its own.
  const auto deadline = started + kFailWithin;
  std::vector<bool> ended(outcomes.size(), false);
  for (size_t left = outcomes.size(); left > 0 && Clock::now() < deadline;) {
    for (int i = 0; i < job.size(); ++i) {
      if (ended[i] || !job.proc(i).poll()) continue;
      ended[i] = true;
      --left;
      outcomes[i].ms = std::chrono::duration_cast<milliseconds>(Clock::now() - started).count();
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (int i = 0; i < job.size(); ++i) {
    SCOPED_TRACE("process " + std::to_string(i) + " (rank " + std::to_string(job.spec(i).rank) +
                 " on daemon " + std::to_string(job.spec(i).daemon) + ")");
    EXPECT_TRUE(ended[i]) << "still running " << kFailWithin.count() << " ms after the start";
    const std::string out = job.proc(i).output();
    EXPECT_NE(out.find("init failed"), std::string::npos);
    EXPECT_EQ(out.find("ready"), std::string::npos) << "a communicator formed";
    EXPECT_EQ(job.proc(i).exitCode(), 3);
    auto line = findStatusLine(out, "result");
    EXPECT_TRUE(line.has_value());
    if (line) outcomes[i].result = *line;
  }
  if (::testing::Test::HasFailure()) ADD_FAILURE() << job.report() << cluster.logTails();
  // What each process saw, in the test's output, for whoever reads a CI log.
  for (int i = 0; i < job.size(); ++i) {
    std::printf("  rank %d on daemon %d: status=%d after %lld ms: %s\n", job.spec(i).rank,
                job.spec(i).daemon, outcomes[i].result.status, outcomes[i].ms,
                outcomes[i].result.text.c_str());
  }
  return outcomes;
}

// A short verified loop over daemons 0 and 1: they still form and serve communicators.
void expectClusterStillServes(DaemonCluster& cluster) {
  std::string error;
  auto job = ClusterJob::start(cluster, "after", {0, 1},
                               {"--mode", "loop", "--iters", "20", "--count", "4097"}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(30))) << job->report() << cluster.logTails();
  for (int i = 0; i < job->size(); ++i) {
    auto line = findStatusLine(job->proc(i).output(), "result");
    EXPECT_TRUE(job->proc(i).exitCode() == 0 && line && line->status == 0)
        << "rank " << i << "\n"
        << job->report() << cluster.logTails();
  }
}

// Ranks 0 on daemon 0 and on daemon 1 of a 2-rank communicator: the root keeps the first and
// refuses the second, naming the rank; the first waits for rank 1 until the deadline.
TEST(MultiDaemonBootstrapTest, DuplicateRankOnAnotherDaemonIsRefusedNamingTheRank) {
  std::string error;
  auto cluster = DaemonCluster::start(withInitTimeout(2), &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto started = Clock::now();
  auto job = ClusterJob::startSpecs(*cluster, "duplicate", 2, {{0, 0}, {1, 0}}, {"--mode", "demo"},
                                    &error);
  ASSERT_NE(job, nullptr) << error;
  auto outcomes = expectEveryInitFails(*job, *cluster, started);
  int refused = 0;
  for (const InitOutcome& o : outcomes) {
    if (o.result.status != kInvalidArgument) continue;
    ++refused;
    EXPECT_NE(o.result.text.find("duplicate rank 0"), std::string::npos) << o.result.text;
  }
  EXPECT_EQ(refused, 1) << job->report() << cluster->logTails();
  // The other one was accepted and waited for the missing rank 1.
  for (const InitOutcome& o : outcomes) {
    if (o.result.status != kInvalidArgument) {
      EXPECT_EQ(o.result.status, kTimeout) << o.result.text;
    }
  }
  expectClusterStillServes(*cluster);
}

// Ranks 0 (daemon 0) and 1 (daemon 1) of 3 come; rank 2 never does. Both fail with Timeout at the
// deadline, and the root names the missing rank.
TEST(MultiDaemonBootstrapTest, MissingRankFailsEveryJoinerAtTheDeadline) {
  std::string error;
  auto cluster = DaemonCluster::start(withInitTimeout(2), &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto started = Clock::now();
  auto job =
      ClusterJob::startSpecs(*cluster, "missing", 3, {{0, 0}, {1, 1}}, {"--mode", "demo"}, &error);
  ASSERT_NE(job, nullptr) << error;
  auto outcomes = expectEveryInitFails(*job, *cluster, started);
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(o.result.status, kTimeout) << o.result.text;
    // Not before the deadline: the root waited for the late rank.
    EXPECT_GE(o.ms, kInitTimeoutMs - 500) << o.result.text;
    // Each client's error names the missing rank (within the completion's 100 bytes).
    EXPECT_NE(o.result.text.find("waiting for ranks 2"), std::string::npos) << o.result.text;
  }
  EXPECT_NE(cluster->daemon(0).log().find("waiting for ranks 2:"), std::string::npos)
      << "the root did not name the missing rank 2\n"
      << cluster->logTails();
  expectClusterStillServes(*cluster);
}

// Daemon 1 holds a token other than daemon 0's (the root): the root refuses its join with
// PermissionDenied at once; rank 0 waits for rank 1 until the deadline.
TEST(MultiDaemonBootstrapTest, DaemonWithAnotherTokenIsRefusedWithPermissionDenied) {
  std::string error;
  ClusterOptions options = withInitTimeout(2);
  std::string otherToken;
  options.perDaemonArgs = [&](int d) -> std::vector<std::string> {
    if (d != 1) return {};
    return {"--set", "peer.token_file=" + otherToken};
  };
  // The cluster's directory does not exist before start(): the other token lives in a directory
  // of its own.
  // Declared before the cluster, so removed when the test ends, not once start() returns: a
  // daemon reads its token file during its own startup, which may still be under way then.
  const test::TempDir tokenDir("hc-token");
  otherToken = tokenDir.file("token");
  ASSERT_TRUE(writeTokenFile(otherToken, &error)) << error;
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto started = Clock::now();
  auto job = ClusterJob::start(*cluster, "token", {0, 1}, {"--mode", "demo"}, &error);
  ASSERT_NE(job, nullptr) << error;
  auto outcomes = expectEveryInitFails(*job, *cluster, started);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].result.status, kPermissionDenied) << outcomes[1].result.text;
  EXPECT_LT(outcomes[1].ms, kInitTimeoutMs) << "refused only at the deadline";
  EXPECT_EQ(outcomes[0].result.status, kTimeout) << outcomes[0].result.text;
  EXPECT_NE(cluster->daemon(0).log().find("wrong membership proof"), std::string::npos)
      << cluster->logTails();
}

// The id names 127.0.0.1:<a port nobody listens on> as the root: every joiner keeps trying (a root
// may start late) and fails with Timeout at its deadline.
TEST(MultiDaemonBootstrapTest, RootWhereNothingListensFailsAtTheDeadline) {
  std::string error;
  auto cluster = DaemonCluster::start(withInitTimeout(2), &error);
  ASSERT_NE(cluster, nullptr) << error;
  int port = 0;
  int fd = boundButNotListening(&port);
  ASSERT_GE(fd, 0);
  std::string id = cluster->newId(0, &error);
  ASSERT_FALSE(id.empty()) << error;
  const std::string dead = withRootAddress(id, "127.0.0.1:" + std::to_string(port));
  auto started = Clock::now();
  auto job = ClusterJob::startSpecs(*cluster, "noroot", 2, {{0, 0, {}, dead}, {1, 1, {}, dead}},
                                    {"--mode", "demo"}, &error);
  ASSERT_NE(job, nullptr) << error;
  auto outcomes = expectEveryInitFails(*job, *cluster, started);
  ::close(fd);
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(o.result.status, kTimeout) << o.result.text;
    EXPECT_NE(o.result.text.find(std::to_string(port)), std::string::npos)
        << "the error does not name the root: " << o.result.text;
  }
  expectClusterStillServes(*cluster);
}

// Rank 1's id carries another key: the root cannot tell it from a new communicator, so each rank
// waits alone in its own and both fail with Timeout at the deadline.
TEST(MultiDaemonBootstrapTest, WrongKeyLeavesBothCommunicatorsIncompleteUntilTheDeadline) {
  std::string error;
  auto cluster = DaemonCluster::start(withInitTimeout(2), &error);
  ASSERT_NE(cluster, nullptr) << error;
  std::string id = cluster->newId(0, &error);
  ASSERT_FALSE(id.empty()) << error;
  auto started = Clock::now();
  auto job = ClusterJob::startSpecs(*cluster, "wrongkey", 2,
                                    {{0, 0, {}, id}, {1, 1, {}, withOtherKey(id)}},
                                    {"--mode", "demo"}, &error);
  ASSERT_NE(job, nullptr) << error;
  auto outcomes = expectEveryInitFails(*job, *cluster, started);
  for (const InitOutcome& o : outcomes) EXPECT_EQ(o.result.status, kTimeout) << o.result.text;
  // The root names each incomplete communicator's missing rank.
  const std::string log = cluster->daemon(0).log();
  EXPECT_NE(log.find("waiting for ranks 1:"), std::string::npos) << cluster->logTails();
  EXPECT_NE(log.find("waiting for ranks 0:"), std::string::npos) << cluster->logTails();
}

// Waits until the daemon's log holds `text`.
bool logShows(DaemonProcess& daemon, const std::string& text, Clock::duration timeout) {
  for (const auto until = Clock::now() + timeout; Clock::now() < until;) {
    if (daemon.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// Rank 1 joins at the root (daemon 0) through daemon 1, and its process is killed while it
// waits: daemon 1 withdraws the join, so the root forgets rank 1. Rank 0, coming later, then
// waits for rank 1 until the deadline instead of forming a communicator with a dead rank.
TEST(MultiDaemonBootstrapTest, AJoinWhoseClientDiedIsWithdrawnAtTheRoot) {
  std::string error;
  auto cluster = DaemonCluster::start(withInitTimeout(2), &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto dying =
      ClusterJob::startSpecs(*cluster, "withdrawn", 2, {{1, 1}}, {"--mode", "demo"}, &error);
  ASSERT_NE(dying, nullptr) << error;
  ASSERT_TRUE(logShows(cluster->daemon(0), "of 2 ranks opened by node", seconds(10)))
      << dying->report() << cluster->logTails();
  dying->proc(0).sendSignal(SIGKILL);
  EXPECT_TRUE(logShows(cluster->daemon(0), "withdrew its join of ranks 1", seconds(10)))
      << "the root still holds the dead rank's join\n"
      << cluster->logTails();

  const auto started = Clock::now();
  auto later = ClusterJob::startSpecs(*cluster, "withdrawn", 2, {{0, 0, {}, dying->id()}},
                                      {"--mode", "demo"}, &error);
  ASSERT_NE(later, nullptr) << error;
  for (const InitOutcome& o : expectEveryInitFails(*later, *cluster, started)) {
    EXPECT_EQ(o.result.status, kTimeout) << o.result.text;
    EXPECT_NE(o.result.text.find("waiting for ranks 1"), std::string::npos) << o.result.text;
  }
  expectClusterStillServes(*cluster);
}

}  // namespace
}  // namespace hc::integ
