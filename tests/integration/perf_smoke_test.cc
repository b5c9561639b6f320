// hc-perf end to end at tiny sizes: every operation, every dtype, every reduction operator, with
// checked results (-c 1), against a real daemon. Fails on a non-zero exit, on any row whose
// #wrong is not 0, and when the footer does not say "Out of bounds values : 0 OK".
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace hc::integ {
namespace {

// The data rows of an hc-perf table: lines that are neither comments nor empty.
std::vector<std::vector<std::string>> dataRows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("hc-perf", 0) == 0) continue;
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    rows.push_back(row);
  }
  return rows;
}

class PerfSmokeTest : public ::testing::TestWithParam<int> {};

TEST_P(PerfSmokeTest, EveryOperationAndDtypeChecksOutWithNoWrongElements) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::vector<std::string> argv = {HC_PERF_PATH,
                                         "-s",
                                         daemon->socketPath(),
                                         "-b",
                                         "8",
                                         "-e",
                                         "4K",
                                         "-f",
                                         "8",
                                         "-o",
                                         "all",
                                         "-d",
                                         "all",
                                         "-r",
                                         "all",
                                         "-c",
                                         "1",
                                         "-N",
                                         std::to_string(nranks),
                                         "-n",
                                         "2",
                                         "-w",
                                         "1",
                                         "-m",
                                         "0",
                                         "-T",
                                         "60"};
  auto perf =
      ChildProcess::spawn(argv, daemon->clientEnv(), daemon->dir() + "/hc-perf.log", &error);
  ASSERT_NE(perf, nullptr) << error;
  ASSERT_TRUE(perf->waitExit(std::chrono::seconds(120))) << "hc-perf still running\n"
                                                         << perf->output();
  const std::string out = perf->output();
  EXPECT_EQ(perf->exitCode(), 0) << perf->describeEnd() << "\n"
                                 << out << "\n--- daemon:\n"
                                 << daemon->logTail();
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;

  // size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
  const auto rows = dataRows(out);
  EXPECT_GT(rows.size(), 100u) << "too few rows for every op x dtype x redop\n" << out;
  int wrongRows = 0;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 13u) << "unexpected row format\n" << out;
    for (size_t col : {8, 12}) {
      if (row[col] == "0" || (col == 12 && row[col] == "N/A")) continue;
      if (++wrongRows <= 10) {
        ADD_FAILURE() << "#wrong " << row[col] << " in the row for " << row[2] << " " << row[3]
                      << " size " << row[0];
      }
    }
  }
  // Every operation and every dtype appeared (the tables are headed "# <op>, <n> ranks").
  for (const char* op : {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
                         "alltoall", "gather", "scatter", "sendrecv", "barrier"}) {
    EXPECT_NE(out.find("# " + std::string(op) + ", "), std::string::npos) << op;
  }
  for (const char* dtype : {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
                            "double", "bfloat16", "f8e4m3", "f8e5m2"}) {
    EXPECT_NE(out.find(" " + std::string(dtype) + " "), std::string::npos) << dtype;
  }
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// 3 ranks: a count that is not a power of two, so 1/n in avg is inexact.
INSTANTIATE_TEST_SUITE_P(Ranks, PerfSmokeTest, ::testing::Values(2, 3),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
