// The NCCL shim end to end: hc_shim_check, a program written against the shim's nccl.h (and,
// built a second time, against rccl/rccl.h), runs as the ranks of one job against real daemons.
// Every rank runs the whole case list (shim/check: collectives x dtypes x ops x counts, groups,
// split, bad arguments) and must end with "#wrong 0". Mixed jobs give even ranks libnccl.so.2
// and odd ranks librccl.so.1, as a CUDA and a ROCm build of one framework would. The lifecycle
// and fault scenarios are in shim/shim_lifecycle_test.cc.
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
#include "tests/integration/shim/shim_job.h"

namespace hc::integ {
namespace {

constexpr auto kJobTimeout = std::chrono::seconds(150);

// Runs ranks as one job with id and expects every rank to exit 0 with "#wrong 0" and no WRONG or
// ERROR line; on failure, attaches every rank's output and logs() (daemon logs).
void runJob(const std::vector<ShimRankSpec>& ranks, const std::string& id, const std::string& dir,
            const std::string& name, const std::function<std::string()>& logs) {
  ASSERT_FALSE(id.empty());
  std::string error;
  auto job = ShimJob::start(ranks, id, dir, name, &error);
  ASSERT_NE(job, nullptr) << error;
  EXPECT_EQ(job->expectAllPassed(kJobTimeout), "") << "\n" << logs();
}

// Mixed jobs give odd ranks librccl.so.1; quick leaves out the 1 Mi + 3 count.
std::vector<ShimRankSpec> ranksOn(const std::vector<std::string>& sockets, bool mixed, bool quick) {
  std::vector<ShimRankSpec> out;
  for (size_t r = 0; r < sockets.size(); ++r) {
    ShimRankSpec spec;
    spec.lib = mixed && r % 2 == 1 ? ShimLib::Rccl : ShimLib::Nccl;
    spec.socket = sockets[r];
    if (quick) spec.args.push_back("--quick");
    out.push_back(spec);
  }
  return out;
}

class ShimTest : public ::testing::TestWithParam<bool> {};

TEST_P(ShimTest, EveryCaseIsRightOnOneDaemon) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const std::string id = newShimId(daemon->socketPath(), daemon->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  const std::string s = daemon->socketPath();
  runJob(ranksOn({s, s, s, s}, GetParam(), /*quick=*/false), id, daemon->dir(), "one-daemon",
         [&] { return daemon->logTail(); });
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// Counts 0, 1 and 7 across daemons: the 1 Mi + 3 count runs on one daemon, where it is cheap.
TEST_P(ShimTest, EveryCaseIsRightAcrossTwoDaemons) {
  std::string error;
  auto cluster = DaemonCluster::start(ClusterOptions{}, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::string s0 = cluster->daemon(0).socketPath(), s1 = cluster->daemon(1).socketPath();
  // Made at daemon 0, so it names daemon 0 as the root.
  const std::string id = newShimId(s0, cluster->dir(), &error);
  ASSERT_FALSE(id.empty()) << error;
  runJob(ranksOn({s0, s1, s0, s1}, GetParam(), /*quick=*/true), id, cluster->dir(), "two-daemons",
         [&] { return cluster->logTails(); });
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
  const std::string id = newShimId(daemon->socketPath(), daemon->dir(), &error);
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
  // Which path host memory takes and how operations are ordered (no GPU runtime here).
  EXPECT_NE(log.find("; host memory: "), std::string::npos) << log;
  EXPECT_NE(log.find("no GPU runtime loaded"), std::string::npos) << log;
  EXPECT_NE(log.find("NCCL_IB_HCA is set and has no effect"), std::string::npos) << log;
  EXPECT_EQ(log.find("NCCL_DEBUG is set"), std::string::npos) << log;
  // With a debug file, stderr carries none of it.
  EXPECT_EQ(rank->output().find("NCCL INFO"), std::string::npos) << rank->output();
}

}  // namespace
}  // namespace hc::integ
