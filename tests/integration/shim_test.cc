// The NCCL shim end to end: hc_shim_check, a program written against the shim's nccl.h (and,
// built a second time, against rccl/rccl.h), runs as the ranks of one job against real daemons.
// Every rank runs the whole case list (shim/check: collectives x dtypes x ops x counts, groups,
// split, bad arguments) and must end with "#wrong 0". Mixed jobs give even ranks libnccl.so.2
// and odd ranks librccl.so.1, as a CUDA and a ROCm build of one framework would.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/multi_daemon.h"

namespace hc::integ {
namespace {

constexpr auto kJobTimeout = std::chrono::seconds(150);

enum class Lib { Nccl, Rccl };
const char* program(Lib lib) {
  return lib == Lib::Nccl ? HC_SHIM_CHECK_PATH : HC_SHIM_CHECK_RCCL_PATH;
}

// A fresh ncclGetUniqueId made through the shim by a client of the daemon at socket.
std::string newId(const std::string& socket, const std::string& dir, std::string* error) {
  auto tool = ChildProcess::spawn({HC_SHIM_CHECK_PATH, "--new-id"}, {{"HC_SOCKET", socket}},
                                  dir + "/shim-new-id.log", error);
  if (!tool) return "";
  if (!tool->waitExit(std::chrono::seconds(30)) || tool->exitCode() != 0) {
    *error = "hc_shim_check --new-id: " + tool->describeEnd() + ": " + tool->output();
    return "";
  }
  std::string hex = tool->output();
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  return hex;
}

struct ShimRank {
  Lib lib;
  std::string socket;  // the daemon this rank uses
};

// Runs ranks[r] as rank r of one job with id and expects every rank to exit 0 with "#wrong 0"
// and no WRONG or ERROR line; on failure, attaches every rank's output and extra (daemon logs).
// quick leaves out the 1 Mi + 3 count.
void runJob(const std::vector<ShimRank>& ranks, const std::string& id, const std::string& dir,
            const std::string& name, bool quick, const std::function<std::string()>& logs) {
  ASSERT_FALSE(id.empty());
  std::vector<std::unique_ptr<ChildProcess>> procs;
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r) {
    std::string error;
    std::vector<std::string> argv = {program(ranks[r].lib),
                                     "--rank",
                                     std::to_string(r),
                                     "--nranks",
                                     std::to_string(n),
                                     "--id",
                                     id};
    if (quick) argv.push_back("--quick");
    auto p = ChildProcess::spawn(argv, {{"HC_SOCKET", ranks[r].socket}},
                                 dir + "/" + name + "-rank" + std::to_string(r) + ".log", &error);
    ASSERT_NE(p, nullptr) << error;
    procs.push_back(std::move(p));
  }
  std::string problems, outputs;
  for (int r = 0; r < n; ++r) {
    const std::string who = "rank " + std::to_string(r) + ": ";
    if (!procs[r]->waitExit(kJobTimeout)) problems += who + "still running\n";
    const std::string out = procs[r]->output();
    outputs += "--- " + who + procs[r]->describeEnd() + "\n" + out;
    if (procs[r]->exitCode() != 0) problems += who + procs[r]->describeEnd() + "\n";
    if (out.find("#wrong 0\n") == std::string::npos) problems += who + "no '#wrong 0'\n";
    for (const char* bad : {"ERROR ", "WRONG "}) {
      if (out.find(bad) != std::string::npos) problems += who + "printed " + bad + "lines\n";
    }
  }
  EXPECT_EQ(problems, "") << outputs << "\n" << logs();
}

std::vector<ShimRank> ranksOn(const std::vector<std::string>& sockets, bool mixed) {
  std::vector<ShimRank> out;
  for (size_t r = 0; r < sockets.size(); ++r) {
    out.push_back({mixed && r % 2 == 1 ? Lib::Rccl : Lib::Nccl, sockets[r]});
  }
  return out;
}

class ShimTest : public ::testing::TestWithParam<bool> {};

TEST_P(ShimTest, EveryCaseIsRightOnOneDaemon) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string id = newId(daemon->socketPath(), daemon->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  const std::string s = daemon->socketPath();
  runJob(ranksOn({s, s, s, s}, GetParam()), id, daemon->dir(), "one-daemon",
         /*quick=*/false, [&] { return daemon->logTail(); });
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// Counts 0, 1 and 7 across daemons: the 1 Mi + 3 count runs on one daemon, where it is cheap.
TEST_P(ShimTest, EveryCaseIsRightAcrossTwoDaemons) {
  std::string error;
  auto cluster = DaemonCluster::start(ClusterOptions{}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::string s0 = cluster->daemon(0).socketPath(), s1 = cluster->daemon(1).socketPath();
  // Made at daemon 0, so it names daemon 0 as the root.
  const std::string id = newId(s0, cluster->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  runJob(ranksOn({s0, s1, s0, s1}, GetParam()), id, cluster->dir(), "two-daemons",
         /*quick=*/true, [&] { return cluster->logTails(); });
}

INSTANTIATE_TEST_SUITE_P(Libraries, ShimTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "MixedNcclRccl" : "NcclOnly"; });

TEST(ShimDebugTest, NcclDebugVersionPrintsABannerNamingHeteroComm) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto tool = ChildProcess::spawn({HC_SHIM_CHECK_PATH, "--new-id"},
                                  {{"HC_SOCKET", daemon->socketPath()}, {"NCCL_DEBUG", "VERSION"}},
                                  daemon->dir() + "/banner.log", &error);
  ASSERT_NE(tool, nullptr) << error;
  ASSERT_TRUE(tool->waitExit(std::chrono::seconds(30)));
  EXPECT_EQ(tool->exitCode(), 0) << tool->output();
  EXPECT_NE(tool->output().find("NCCL version 2.30.7+hetero-comm"), std::string::npos)
      << tool->output();
}

}  // namespace
}  // namespace hc::integ

namespace hc::integ {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ShimNoDaemonTest, UniqueIdWithoutADaemonIsASystemErrorSayingHowToStartOne) {
  const std::string dir = ::testing::TempDir();
  const std::string socket = dir + "/no-hetero-commd-here.sock";
  std::string error;
  auto tool = ChildProcess::spawn({HC_SHIM_CHECK_PATH, "--new-id"}, {{"HC_SOCKET", socket}},
                                  dir + "/no-daemon.log", &error);
  ASSERT_NE(tool, nullptr) << error;
  ASSERT_TRUE(tool->waitExit(std::chrono::seconds(30)));
  EXPECT_EQ(tool->exitCode(), 1) << tool->output();
  // ncclGetErrorString(ncclSystemError), then ncclGetLastError's text.
  EXPECT_NE(tool->output().find("unhandled system error"), std::string::npos) << tool->output();
  EXPECT_NE(tool->output().find(socket), std::string::npos) << tool->output();
  EXPECT_NE(tool->output().find("systemctl start hetero-commd"), std::string::npos)
      << tool->output();
}

TEST(ShimDebugTest, NcclDebugInfoGoesToTheDebugFileWithEventsAndIgnoredVariables) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string id = newId(daemon->socketPath(), daemon->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  auto rank = ChildProcess::spawn(
      {HC_SHIM_CHECK_PATH, "--rank", "0", "--nranks", "1", "--id", id, "--quick"},
      {{"HC_SOCKET", daemon->socketPath()},
       {"NCCL_DEBUG", "INFO"},
       {"NCCL_DEBUG_FILE", daemon->dir() + "/nccl.%p.log"},
       {"NCCL_IB_HCA", "mlx5_0"}},
      daemon->dir() + "/info-rank.log", &error);
  ASSERT_NE(rank, nullptr) << error;
  ASSERT_TRUE(rank->waitExit(kJobTimeout));
  EXPECT_EQ(rank->exitCode(), 0) << rank->output();
  const std::string log = readFile(daemon->dir() + "/nccl." + std::to_string(rank->pid()) + ".log");
  EXPECT_NE(log.find("NCCL INFO libnccl.so.2: comm 0x"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0 nRanks 1 - Init COMPLETE"), std::string::npos) << log;
  EXPECT_NE(log.find("NCCL_IB_HCA is set and has no effect"), std::string::npos) << log;
  EXPECT_EQ(log.find("NCCL_DEBUG is set"), std::string::npos) << log;
  // With a debug file, stderr carries none of it.
  EXPECT_EQ(rank->output().find("NCCL INFO"), std::string::npos) << rank->output();
}

}  // namespace
}  // namespace hc::integ
