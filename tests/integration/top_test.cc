// hcctl top against a real daemon and rank workers, without a terminal: --once lists each
// communicator with the operations its ranks finished, their bytes, the rank the others wait for,
// and the failures after that rank dies; without --once, --iterations plain frames; an
// unreachable daemon is a clear error with hcctl's exit code 2. (top_pty_test.cc: the live view.)
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/integration/hcctl_run.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One communicator row of a frame, by column (tools/hcctl/top_frame.h).
struct TopRow {
  std::string id, key, ranks, local, state;
  double opsPerSecond = -1;
  std::string bytesPerSecond;  // "1.5 KiB/s"
  uint64_t ops = 0;
  std::string bytes;  // "576.0 KiB"
  uint64_t failed = 0;
  std::string lastOp;  // "broadcast #6 started 1.2s"
  std::string waiting;
};

// The rows of the first frame in `output`, keyed by communicator id.
std::map<std::string, TopRow> rowsOf(const std::string& output) {
  std::map<std::string, TopRow> rows;
  std::istringstream in(output);
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ID ", 0) == 0) {
      table = true;
      continue;
    }
    if (!table || line.empty() || line[0] == '(') continue;
    if (line.rfind("hcctl top - ", 0) == 0) break;  // the next frame
    std::istringstream words(line);
    TopRow r;
    std::string unit, bytesUnit, op, seq, state, age;
    words >> r.id >> r.key >> r.ranks >> r.local >> r.state >> r.opsPerSecond >> r.bytesPerSecond >>
        unit >> r.ops >> r.bytes >> bytesUnit >> r.failed >> op >> seq >> state >> age;
    r.bytesPerSecond += " " + unit;
    r.bytes += " " + bytesUnit;
    r.lastOp = op + " " + seq + " " + state + " " + age;
    std::getline(words >> std::ws, r.waiting);
    rows[r.id] = r;
  }
  return rows;
}

std::string adminSocket(const DaemonProcess& d) { return d.dir() + "/run/hetero-commd-admin.sock"; }

HcctlRun topOnce(const DaemonProcess& d) {
  return hcctl({"--socket", adminSocket(d), "top", "--once", "--interval", "0.3"}, d.dir());
}

// Asks `top --once` until `until` holds for the row of communicator `id`; the last run.
template <class Until>
HcctlRun topUntil(const DaemonProcess& d, const std::string& id, Until until, TopRow* row) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  HcctlRun run;
  do {
    run = topOnce(d);
    auto rows = rowsOf(run.output);
    if (run.exitCode == 0 && rows.count(id) != 0 && until(rows[id])) {
      *row = rows[id];
      return run;
    }
  } while (std::chrono::steady_clock::now() < deadline);
  ADD_FAILURE() << "top --once never showed what was waited for:\n" << run.output;
  return run;
}

// The id of the one communicator with `nranks` ranks, from hcctl comms --json.
std::string commWithRanks(const DaemonProcess& d, int nranks, nlohmann::json* comm) {
  HcctlRun run = hcctl({"--socket", adminSocket(d), "comms", "--json"}, d.dir());
  const auto parsed = nlohmann::json::parse(run.output, nullptr, false);
  if (run.exitCode != 0 || parsed.is_discarded()) return "";
  for (const auto& c : parsed.value("communicators", nlohmann::json::array())) {
    if (c.value("nranks", 0) != nranks) continue;
    *comm = c;
    return c.value("id", "");  // uint64 is a string in proto JSON
  }
  return "";
}

TEST(HcctlTopTest, OnceShowsCountsTheWaitedForRankAndFailures) {
  std::string error;
  auto d = startServingDaemon({});
  ASSERT_NE(d, nullptr);
  // Each loop iteration is an allreduce of 16384 int32 (64 KiB) and a broadcast of one int32.
  // Rank 2 stops after its third allreduce: every rank finished 3 allreduces and 2 broadcasts
  // (5 operations, 192 KiB + 8 B), and ranks 0 and 1 wait in the broadcast, collective 6.
  auto stuck = RankJob::start(*d, "stuck", 3, {"--mode", "loop", "--count", "16384"}, &error,
                              [](int rank) -> std::vector<std::string> {
                                if (rank == 2) return {"--mode", "hang", "--stall-after", "3"};
                                return {};
                              });
  ASSERT_NE(stuck, nullptr) << error;
  auto busy = RankJob::start(*d, "busy", 2, {"--mode", "loop", "--count", "1024"}, &error);
  ASSERT_NE(busy, nullptr) << error;
  ASSERT_TRUE(stuck->rank(2).waitForOutput("stalled", seconds(30))) << stuck->report();
  ASSERT_TRUE(busy->waitAllOutput("progress", seconds(30))) << busy->report();

  nlohmann::json stuckComm, busyComm;
  const std::string stuckId = commWithRanks(*d, 3, &stuckComm);
  const std::string busyId = commWithRanks(*d, 2, &busyComm);
  ASSERT_FALSE(stuckId.empty()) << d->logTail();
  ASSERT_FALSE(busyId.empty()) << d->logTail();

  TopRow row;
  HcctlRun run = topUntil(
      *d, stuckId, [](const TopRow& r) { return r.waiting == "2 (collective #6)"; }, &row);
  ASSERT_EQ(run.exitCode, 0) << run.output;
  EXPECT_EQ(run.output.find('\x1b'), std::string::npos) << "escapes without a terminal";
  EXPECT_EQ(run.output.rfind("hcctl top - ", 0), 0u) << run.output;
  EXPECT_EQ(row.key, stuckComm.value("key", "").substr(0, 8));
  EXPECT_EQ(row.ranks, "3");
  EXPECT_EQ(row.local, "0-2");
  EXPECT_EQ(row.state, "active");
  EXPECT_EQ(row.ops, 15u) << run.output;
  EXPECT_EQ(row.bytes, "576.0 KiB") << run.output;  // 3 ranks x (3 x 64 KiB + 2 x 4 B)
  EXPECT_EQ(row.opsPerSecond, 0.0) << "a stuck job finishes nothing\n" << run.output;
  EXPECT_EQ(row.failed, 0u);
  EXPECT_EQ(row.lastOp.rfind("broadcast #6 ", 0), 0u) << run.output;
  // The daemon's own count of the bytes, which the column rounds.
  HcctlRun comms = hcctl({"--socket", adminSocket(*d), "comms", "--json"}, d->dir());
  EXPECT_NE(comms.output.find("\"bytes_completed\": \"589848\""), std::string::npos)
      << comms.output;

  // The busy job finishes operations all the time: rates over the 0.3 s interval.
  const TopRow busyRow = rowsOf(run.output)[busyId];
  EXPECT_GT(busyRow.opsPerSecond, 0.0) << run.output;
  EXPECT_NE(busyRow.bytesPerSecond, "0 B/s") << run.output;

  // Rank 2 dies while ranks 0 and 1 wait on it. They are stopped first, so that they cannot see
  // their failed broadcasts and leave (taking the communicator with them) before top looks.
  stuck->rank(0).sendSignal(SIGSTOP);
  stuck->rank(1).sendSignal(SIGSTOP);
  stuck->rank(2).sendSignal(SIGKILL);
  run = topUntil(
      *d, stuckId, [](const TopRow& r) { return r.failed > 0; }, &row);
  EXPECT_EQ(row.failed, 2u) << "ranks 0 and 1's broadcasts\n" << run.output;
  EXPECT_EQ(row.state, "failed") << run.output;
  EXPECT_EQ(row.ops, 15u) << run.output;
  EXPECT_NE(run.output.find("1 failed), "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(", 2 failed ops"), std::string::npos) << run.output;
  stuck->rank(0).sendSignal(SIGCONT);
  stuck->rank(1).sendSignal(SIGCONT);
}

TEST(HcctlTopTest, WithoutATerminalPrintsIterationsPlainFrames) {
  auto d = startServingDaemon({});
  ASSERT_NE(d, nullptr);
  HcctlRun run = hcctl(
      {"--socket", adminSocket(*d), "top", "--interval", "0.1", "--iterations", "3"}, d->dir());
  ASSERT_EQ(run.exitCode, 0) << run.output;
  EXPECT_EQ(run.output.find('\x1b'), std::string::npos) << run.output;
  size_t frames = 0;
  for (size_t at = run.output.find("hcctl top - "); at != std::string::npos;
       at = run.output.find("hcctl top - ", at + 1)) {
    ++frames;
  }
  EXPECT_EQ(frames, 3u) << run.output;
  EXPECT_NE(run.output.find("(no communicators)"), std::string::npos) << run.output;
}

TEST(HcctlTopTest, OnceFailsWithExitTwoWhenNobodyListens) {
  auto d = startServingDaemon({});
  ASSERT_NE(d, nullptr);
  const std::string nobody = d->dir() + "/nobody.sock";
  HcctlRun run =
      hcctl({"--socket", nobody, "--connect-timeout-ms", "300", "top", "--once"}, d->dir());
  EXPECT_EQ(run.exitCode, 2) << run.output;
  EXPECT_NE(run.output.find("hcctl: cannot connect to unix:" + nobody), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("hcctl top - "), std::string::npos) << "no frame\n" << run.output;
  HcctlRun bad = hcctl({"--socket", adminSocket(*d), "top", "--interval", "0"}, d->dir());
  EXPECT_EQ(bad.exitCode, 1) << bad.output;
}

}  // namespace
}  // namespace hc::integ
