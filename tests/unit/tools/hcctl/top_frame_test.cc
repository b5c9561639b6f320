// hcctl top's frames from samples made up here: rates over the interval between two samples, the
// row of each communicator, and the units.
#include "tools/hcctl/top_frame.h"

#include <gtest/gtest.h>

#include <sstream>

namespace hc::hcctl::top {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kNowNs = 1'700'000'000'000'000'000;

CommSample comm(uint64_t id, const std::string& key, uint64_t ops, uint64_t bytes) {
  CommSample c;
  c.id = id;
  c.key = key;
  c.nranks = 4;
  c.localRanks = {0, 1};
  c.state = "active";
  c.opsCompleted = ops;
  c.bytesCompleted = bytes;
  return c;
}

Sample sampleAt(std::chrono::steady_clock::time_point taken, std::vector<CommSample> comms) {
  Sample s;
  s.taken = taken;
  s.wallNs = kNowNs;
  s.uptimeMs = 3'723'000;  // 1:02:03
  s.clients = 2;
  s.comms = std::move(comms);
  return s;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The whitespace-separated words of a line.
std::vector<std::string> wordsOf(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

const Source kSource{"node1", "1.2.3", "unix:/run/hc-admin.sock", 0.5};

TEST(TopFrameTest, RatesAreTheGainOverTheInterval) {
  const auto t0 = std::chrono::steady_clock::now();
  const Sample before = sampleAt(t0, {comm(1, "aa", 100, 4096)});
  const CommRates r = ratesOf(comm(1, "aa", 300, 4096 + 2048), before, 2.0);
  EXPECT_DOUBLE_EQ(r.opsPerSecond, 100.0);
  EXPECT_DOUBLE_EQ(r.bytesPerSecond, 1024.0);
}

TEST(TopFrameTest, ACommunicatorCreatedInTheIntervalCountsFromZero) {
  const Sample before = sampleAt(std::chrono::steady_clock::now(), {comm(1, "aa", 100, 0)});
  EXPECT_DOUBLE_EQ(ratesOf(comm(2, "bb", 50, 500), before, 0.5).opsPerSecond, 100.0);
  // The same id with another key is another communicator.
  EXPECT_DOUBLE_EQ(ratesOf(comm(1, "cc", 50, 0), before, 1.0).opsPerSecond, 50.0);
}

TEST(TopFrameTest, CountersThatWentBackGiveZeroNotAHugeRate) {
  const Sample before = sampleAt(std::chrono::steady_clock::now(), {comm(1, "aa", 100, 100)});
  const CommRates r = ratesOf(comm(1, "aa", 10, 10), before, 1.0);
  EXPECT_DOUBLE_EQ(r.opsPerSecond, 0.0);
  EXPECT_DOUBLE_EQ(r.bytesPerSecond, 0.0);
  EXPECT_DOUBLE_EQ(ratesOf(comm(1, "aa", 200, 0), before, 0.0).opsPerSecond, 0.0);
}

TEST(TopFrameTest, FrameHasHeaderTotalsAndARowPerCommunicator) {
  const auto t0 = std::chrono::steady_clock::now();
  const Sample before = sampleAt(t0, {comm(1, "0123456789abcdef0123456789abcdef", 10, 0)});
  CommSample busy = comm(1, "0123456789abcdef0123456789abcdef", 30, 3 * 1024 * 1024);
  busy.lastOp = LastOp{"all_reduce", 15, "completed", kNowNs - 2'500'000'000};
  CommSample stuck = comm(7, "0123456789abcdef0123456789abcdef/2.1", 6, 24);
  stuck.localRanks = {0, 1, 2, 5};
  stuck.opsFailed = 2;
  stuck.state = "failed";
  stuck.lastOp = LastOp{"broadcast", 6, "failed", kNowNs - 40'000'000};
  stuck.waitingSeq = 6;
  stuck.waitingFor = {3, 2};
  const Sample now = sampleAt(t0 + milliseconds(500), {busy, stuck});

  const std::vector<std::string> lines = linesOf(formatFrame(kSource, before, now, 0));
  ASSERT_EQ(lines.size(), 6u) << formatFrame(kSource, before, now, 0);
  EXPECT_EQ(
      lines[0].rfind("hcctl top - node1 - hetero-commd 1.2.3 at unix:/run/hc-admin.sock - ", 0), 0u)
      << lines[0];
  EXPECT_TRUE(lines[0].ends_with(" - every 0.5 s")) << lines[0];
  // busy gained 20 ops in 0.5 s; stuck is new: its 6 ops and 24 bytes count in the interval.
  EXPECT_EQ(
      lines[1],
      "up 1:02:03, 2 clients, 2 communicators (1 failed), 52.0 ops/s, 6.0 MiB/s, 2 failed ops");
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(wordsOf(lines[3]),
            (std::vector<std::string>{"ID", "KEY", "RANKS", "LOCAL", "STATE", "OPS/S", "BYTES/S",
                                      "OPS", "BYTES", "FAILED", "LAST", "OP", "WAITING", "FOR"}));
  EXPECT_EQ(
      wordsOf(lines[4]),
      (std::vector<std::string>{"1", "01234567", "4", "0-1", "active", "40.0", "6.0", "MiB/s", "30",
                                "3.0", "MiB", "0", "all_reduce", "#15", "completed", "2.5s", "-"}));
  EXPECT_EQ(wordsOf(lines[5]),
            (std::vector<std::string>{"7", "01234567/2.1", "4", "0-2,5", "failed", "12.0", "48",
                                      "B/s", "6", "24", "B", "2", "broadcast", "#6", "failed",
                                      "40ms", "2-3", "(collective", "#6)"}));
  // Columns line up: every row's OPS/S starts where the title's does.
  const size_t opsColumn = lines[3].find("OPS/S");
  EXPECT_EQ(lines[4].find("40.0"), opsColumn);
  EXPECT_EQ(lines[5].find("12.0"), opsColumn);
}

TEST(TopFrameTest, LinesAreCutToTheTerminalWidth) {
  const auto t0 = std::chrono::steady_clock::now();
  const Sample s = sampleAt(t0, {comm(1, "aa", 1, 1)});
  for (const std::string& line : linesOf(formatFrame(kSource, s, s, 40))) {
    EXPECT_LE(line.size(), 40u) << line;
  }
}

TEST(TopFrameTest, NoCommunicatorsSaysSo) {
  const Sample s = sampleAt(std::chrono::steady_clock::now(), {});
  const std::vector<std::string> lines = linesOf(formatFrame(kSource, s, s, 0));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4], "(no communicators)");
  EXPECT_NE(lines[1].find("0 communicators (0 failed), 0.0 ops/s, 0 B/s, 0 failed ops"),
            std::string::npos)
      << lines[1];
}

TEST(TopFrameTest, AFailedTraceShowsWhyInsteadOfRanks) {
  CommSample c = comm(1, "aa", 1, 1);
  c.waitingError = "deadline exceeded";
  const Sample s = sampleAt(std::chrono::steady_clock::now(), {c});
  EXPECT_TRUE(linesOf(formatFrame(kSource, s, s, 0)).back().ends_with("? (deadline exceeded)"));
}

TEST(TopFrameTest, UnavailableFrameKeepsTheHeaderAndSaysWhy) {
  const std::vector<std::string> lines =
      linesOf(formatUnavailable(kSource, kNowNs, "Control.GetStats at x failed", 0));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("hcctl top - node1", 0), 0u);
  EXPECT_EQ(lines[1], "Control.GetStats at x failed");
}

TEST(TopFrameTest, Units) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(0.4), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(5.0 * 1024 * 1024 * 1024), "5.0 GiB");
  EXPECT_EQ(formatAge(-5), "0ms");
  EXPECT_EQ(formatAge(850'000'000), "850ms");
  EXPECT_EQ(formatAge(4'200'000'000), "4.2s");
  EXPECT_EQ(formatAge(int64_t{12} * 60 * 1'000'000'000), "12m");
  EXPECT_EQ(formatAge(int64_t{3} * 3600 * 1'000'000'000), "3h");
  EXPECT_EQ(formatAge(int64_t{49} * 3600 * 1'000'000'000), "2d");
  EXPECT_EQ(formatRanks({}), "-");
  EXPECT_EQ(formatRanks({5, 0, 1, 2, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(formatRanks({3}), "3");
}

}  // namespace
}  // namespace hc::hcctl::top
