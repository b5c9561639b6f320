// hc-perf end to end at tiny sizes: every operation, every dtype, every reduction operator, with
// checked results (-c 1), against a real daemon, with host buffers and with --device buffers.
// Fails on a non-zero exit, on any row whose #wrong is not 0, and when the footer does not say
// "Out of bounds values : 0 OK".
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

// Runs hc-perf against the daemon at tiny sizes, every operation and dtype, checked (-c 1), with
// `extra` flags after the common ones; returns its output after expecting a clean exit and the
// footer's "0 OK".
std::string runPerf(DaemonProcess& daemon, int nranks, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {HC_PERF_PATH, "-s", daemon.socketPath(), "-N",
                                   std::to_string(nranks)};
  for (const char* flag : {"-b", "8", "-e", "4K", "-f", "8", "-o", "all", "-d", "all",
                           "-c", "1", "-n", "2",  "-w", "1", "-m", "0",   "-T", "60"}) {
    argv.emplace_back(flag);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::string error;
  auto perf = ChildProcess::spawn(argv, daemon.clientEnv(), daemon.dir() + "/hc-perf.log", &error);
  if (perf == nullptr) {
    ADD_FAILURE() << error;
    return "";
  }
  if (!perf->waitExit(std::chrono::seconds(120))) {
    ADD_FAILURE() << "hc-perf still running\n" << perf->output();
    return "";
  }
  const std::string out = perf->output();
  EXPECT_EQ(perf->exitCode(), 0) << perf->describeEnd() << "\n"
                                 << out << "\n--- daemon:\n"
                                 << daemon.logTail();
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  return out;
}

// Expects at least minRows data rows, each with #wrong 0 out of place and 0 (or N/A) in place.
void expectNoWrongRows(const std::string& out, size_t minRows) {
  // size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
  const auto rows = dataRows(out);
  EXPECT_GE(rows.size(), minRows) << "too few rows\n" << out;
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
}

class PerfSmokeTest : public ::testing::TestWithParam<int> {};

TEST_P(PerfSmokeTest, EveryOperationAndDtypeChecksOutWithNoWrongElements) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string out = runPerf(*daemon, nranks, {"-r", "all"});
  expectNoWrongRows(out, 100);  // every op x dtype x redop
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

// --small-ops: the rows up to 4 KiB per rank combine in the communicator's shared area (the
// larger ones of reduce-scatter, alltoall and the rest go through the daemon), every row checked,
// timed each operation alone as bench/small-ops/run times them.
TEST(PerfSmallOpsSmokeTest, EveryOperationAndDtypeThroughTheAreaChecksOut) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string out = runPerf(*daemon, 3, {"-r", "all", "--small-ops", "--latency"});
  EXPECT_NE(out.find("# small ops: host_small_ops"), std::string::npos) << out;
  expectNoWrongRows(out, 100);
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// --device: the buffers live in simulated device memory and every operation is ordered on a sim
// stream; the checked data goes in and out by copies. The places cover one device shared by both
// ranks (the daemon reduces on the device), two vendors' devices (host staging between them) and
// a host rank beside a device rank.
class PerfDeviceSmokeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PerfDeviceSmokeTest, DeviceBuffersCheckOutWithNoWrongElements) {
  const std::string places = GetParam();
  std::string error;
  auto daemon =
      DaemonProcess::start({"--set", "devices.sim.nvidia=1", "--set", "devices.sim.amd=1"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string out = runPerf(*daemon, 2, {"-r", "sum", "--device", places});
  EXPECT_NE(out.find("# buffers: "), std::string::npos) << "no buffer placement line\n" << out;
  expectNoWrongRows(out, 100);  // every op x dtype
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Places, PerfDeviceSmokeTest,
                         ::testing::Values("sim:nvidia:0", "sim:nvidia:0,sim:amd:0",
                                           "host,sim:amd:0"),
                         [](const auto& p) {
                           std::string name = p.param;
                           for (char& ch : name) {
                             if (ch == ':' || ch == ',') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace hc::integ
