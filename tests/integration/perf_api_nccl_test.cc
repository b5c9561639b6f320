// hc-perf --api nccl: the rows of an hc run, through the shim's NCCL API (libnccl.so.2), checked
// (-c 1) against a real daemon. Fails when a row of hc has no NCCL counterpart (barrier aside:
// NCCL has none), when any row has a wrong element, and when the preamble does not name the API
// and the library it went through. --latency gives a median at every size.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace hc::integ {
namespace {

// Runs hc-perf on 2 ranks of the daemon with the given flags after the common ones; returns its
// output after expecting a clean exit and the footer's "0 OK".
std::string runPerf(DaemonProcess& daemon, const std::string& name,
                    const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {HC_PERF_PATH, "-s", daemon.socketPath(),
                                   "-N",         "2",  "-c",
                                   "1",          "-n", "2",
                                   "-w",         "1",  "-m",
                                   "0",          "-T", "60"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string error;
  auto perf =
      ChildProcess::spawn(argv, daemon.clientEnv(), daemon.dir() + "/" + name + ".log", &error);
  if (perf == nullptr) {
    ADD_FAILURE() << error;
    return "";
  }
  if (!perf->waitExit(std::chrono::seconds(150))) {
    ADD_FAILURE() << name << ": hc-perf still running\n" << perf->output();
    return "";
  }
  const std::string out = perf->output();
  EXPECT_EQ(perf->exitCode(), 0) << name << ": " << perf->describeEnd() << "\n"
                                 << out << "\n--- daemon:\n"
                                 << daemon.logTail();
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << name << "\n" << out;
  return out;
}

// The data rows as "op size count type redop root", the op taken from the table's header
// ("# allreduce, 2 ranks, api hc"); each row's #wrong columns must be 0 (or N/A in place).
std::set<std::string> rowKeys(const std::string& out) {
  std::set<std::string> keys;
  std::istringstream lines(out);
  std::string op;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ", 0) == 0 && line.find(", 2 ranks, api ") != std::string::npos) {
      op = line.substr(2, line.find(',') - 2);
      continue;
    }
    if (line.empty() || line[0] == '#' || line.rfind("hc-perf", 0) == 0) continue;
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    if (row.size() != 13u) {
      ADD_FAILURE() << "unexpected row format: " << line;
      continue;
    }
    EXPECT_EQ(row[8], "0") << op << " " << line;
    EXPECT_TRUE(row[12] == "0" || row[12] == "N/A") << op << " " << line;
    keys.insert(op + " " + row[0] + " " + row[1] + " " + row[2] + " " + row[3] + " " + row[4]);
  }
  return keys;
}

TEST(PerfApiNcclTest, EveryRowOfHcButBarrierRunsThroughNcclWithNoWrongElements) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::vector<std::string> grid = {"-b", "8",   "-e", "4K",  "-f", "64",
                                         "-o", "all", "-d", "all", "-r", "all"};
  std::vector<std::string> hcFlags = grid, ncclFlags = grid;
  ncclFlags.insert(ncclFlags.end(), {"--api", "nccl"});
  const std::string hcOut = runPerf(*daemon, "hc", hcFlags);
  const std::string ncclOut = runPerf(*daemon, "nccl", ncclFlags);
  EXPECT_NE(hcOut.find("# api: hc, through libhcclient"), std::string::npos) << hcOut;
  EXPECT_NE(ncclOut.find("# api: nccl, through "), std::string::npos) << ncclOut;
  EXPECT_NE(ncclOut.find("libnccl.so.2"), std::string::npos) << "which library ran\n" << ncclOut;
  EXPECT_NE(ncclOut.find("# api: nccl\n"), std::string::npos) << "no trailer\n" << ncclOut;

  std::set<std::string> expected;
  for (const std::string& key : rowKeys(hcOut)) {
    if (key.rfind("barrier ", 0) != 0) expected.insert(key);
  }
  const std::set<std::string> got = rowKeys(ncclOut);
  EXPECT_GT(expected.size(), 100u) << hcOut;
  for (const std::string& key : expected) {
    EXPECT_TRUE(got.count(key)) << "no NCCL row for: " << key;
  }
  for (const std::string& key : got) EXPECT_TRUE(expected.count(key)) << "extra row: " << key;
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// --latency: each operation alone; every size gets its median, above the 64 KiB that batch mode
// stops at, through either API.
TEST(PerfApiNcclTest, LatencyModeGivesAMedianAtEverySize) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  for (const char* api : {"hc", "nccl"}) {
    const std::string out = runPerf(
        *daemon, std::string("latency-") + api,
        {"-b", "8", "-e", "1M", "-f", "16384", "-o", "allreduce", "--latency", "--api", api});
    EXPECT_NE(out.find("# timing: latency"), std::string::npos) << out;
    EXPECT_NE(out.find("# median latency at 8: "), std::string::npos) << out;
    EXPECT_NE(out.find("# median latency at 131072: "), std::string::npos) << out;
    rowKeys(out);  // no wrong elements
  }
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// Sim device buffers through NCCL: the sim stream goes through as the call's stream, so calls
// return once submitted and the batch ends with the stream's synchronize.
TEST(PerfApiNcclTest, DeviceBuffersThroughNcclCheckOut) {
  std::string error;
  auto daemon = DaemonProcess::start({"--set", "devices.sim.nvidia=1"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string out = runPerf(*daemon, "device",
                                  {"-b", "8", "-e", "64K", "-f", "64", "-o", "all", "--api", "nccl",
                                   "--device", "sim:nvidia:0"});
  EXPECT_GT(rowKeys(out).size(), 20u) << out;
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

}  // namespace
}  // namespace hc::integ
