// NCCL's stream semantics through the shim, end to end without a GPU (shim/README.md, "Streams").
// Two real hetero-commd daemons; ranks of one communicator across them:
//   rank 0 and 1: hc_shim_stream_rank (libnccl.so.2) over the fake CUDA driver, on daemon 0,
//     which loads the same fake as its libcuda.so.1 (a libcuda.so.1 link on its library path), so
//     it maps the ranks' device memory (cuMemAlloc memory by legacy IPC handle, VMM memory by fd);
//   rank 2: hc_shim_stream_rank_rccl (librccl.so.1) over the fake HIP runtime, on daemon 1,
//     which loads the daemon-side fake HIP runtime as its libamdhip64.so.5 (a link on its library
//     path, ahead of Debian's real runtime), so it maps the rank's device memory (hipMalloc memory
//     by legacy IPC handle, VMM memory by fd) on its fake AMD GPU.
// Every rank runs checks (a) to (g) (shim_stream_checks.cc); rank 0 aborts the job's communicator
// and rank 2 the one split from it while an operation waits on their stream (h,
// shim_stream_abort.cc). Each check prints "ok <check>" or fails the rank.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/multi_daemon.h"
#include "tests/integration/shim/shim_job.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

constexpr auto kJobTimeout = std::chrono::seconds(40);
// What daemon 0's device list says of the fake driver's GPU (registry.cc, cuDeviceGetName), and
// daemon 1's of the fake HIP runtime's (hipDeviceGetName, at the client-side fake's PCI address).
constexpr const char* kFakeGpuLine = "backend=cuda model=\"Fake GPU 0\"";
constexpr const char* kFakeHipGpuLine = "backend=hip model=\"Fake HIP GPU 0\"";

// A daemon with a Peer listener on 127.0.0.1 sharing token; over TCP only (UCX_TLS=tcp,self),
// as daemons of separate nodes talk. env adds to the daemon's environment.
std::unique_ptr<DaemonProcess> startDaemon(const std::string& token, EnvVars env,
                                           std::string* error) {
  DaemonProcess::Launch launch;
  launch.env = std::move(env);
  launch.env.emplace_back("UCX_TLS", "tcp,self");
  return DaemonProcess::start(
      {"--set", "peer.listen=127.0.0.1:0", "--set", "peer.token_file=" + token}, launch, error);
}

// A folder <parent>/<name> holding <soname> -> target, for a daemon's LD_LIBRARY_PATH, so that
// only that daemon takes the fake for the vendor's library; "" on failure.
std::string fakeLibraryDir(const std::string& parent, const std::string& name,
                           const std::string& soname, const char* target) {
  const std::string dir = parent + "/" + name;
  if (::mkdir(dir.c_str(), 0700) != 0) return "";
  if (::symlink(target, (dir + "/" + soname).c_str()) != 0) return "";
  return dir;
}

std::string withLibraryPath(const std::string& dir) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  return old != nullptr && *old != '\0' ? dir + ":" + old : dir;
}

// The checks each rank must report passing.
std::vector<std::string> checksOf(int rank) {
  std::vector<std::string> checks = {"a", "b", "c", "d", "e", "f", "g"};
  if (rank != 1) checks.push_back("h");  // rank 1 aborts nothing while an operation waits
  return checks;
}

TEST(ShimStreamTest, CudaAndHipRanksOrderEveryOperationOnItsStreamAcrossTwoDaemons) {
  test::TempDir dir("hc-shim-stream");
  std::string error;
  const std::string token = dir.file("token");
  ASSERT_TRUE(writeTokenFile(token, &error)) << error;
  const std::string cudaLibDir =
      fakeLibraryDir(dir.path(), "fake-libcuda", "libcuda.so.1", HC_FAKE_CUDA_PATH);
  ASSERT_FALSE(cudaLibDir.empty()) << "cannot link the fake driver into " << dir.path();
  const std::string hipLibDir =
      fakeLibraryDir(dir.path(), "fake-libamdhip64", "libamdhip64.so.5", HC_FAKE_HIP_DAEMON_PATH);
  ASSERT_FALSE(hipLibDir.empty()) << "cannot link the fake HIP runtime into " << dir.path();

  auto cudaDaemon = startDaemon(
      token,
      {{"LD_LIBRARY_PATH", withLibraryPath(cudaLibDir)}, {"HC_FAKE_CUDA_DEVICES", "default"}},
      &error);
  ASSERT_NE(cudaDaemon, nullptr) << error;
  auto hipDaemon = startDaemon(token, {{"LD_LIBRARY_PATH", withLibraryPath(hipLibDir)}}, &error);
  ASSERT_NE(hipDaemon, nullptr) << error;
  auto logs = [&] {
    return "--- daemon 0 (fake CUDA) log tail:\n" + cudaDaemon->logTail(60) +
           "--- daemon 1 (fake HIP) log tail:\n" + hipDaemon->logTail(60);
  };
  // Each daemon serves its ranks' device memory only if it found its fake GPU, and only its own
  // vendor's: neither fake may reach the other daemon (daemon 0 finds Debian's real HIP runtime,
  // which sees no GPU).
  ASSERT_TRUE(cudaDaemon->process().waitForOutput(kFakeGpuLine, std::chrono::seconds(10)))
      << "daemon 0 did not load the fake driver as its libcuda.so.1:\n"
      << cudaDaemon->log();
  ASSERT_TRUE(hipDaemon->process().waitForOutput(kFakeHipGpuLine, std::chrono::seconds(10)))
      << "daemon 1 did not load the fake HIP runtime as its libamdhip64.so.5:\n"
      << hipDaemon->log();
  EXPECT_EQ(hipDaemon->log().find("backend=cuda"), std::string::npos) << hipDaemon->log();
  EXPECT_EQ(cudaDaemon->log().find("backend=hip"), std::string::npos) << cudaDaemon->log();

  // Made at daemon 0, so it names daemon 0 as the root.
  const std::string id = newShimId(cudaDaemon->socketPath(), dir.path(), &error);
  ASSERT_FALSE(id.empty()) << error;
  const std::string steps = dir.path() + "/steps";
  ASSERT_EQ(::mkdir(steps.c_str(), 0700), 0);

  auto rank = [&](ShimLib lib, const DaemonProcess& daemon, const char* abort, EnvVars env) {
    ShimRankSpec spec;
    spec.lib = lib;
    spec.socket = daemon.socketPath();
    spec.args = {"--sync", steps, "--abort", abort};
    spec.env = std::move(env);
    return spec;
  };
  // The fakes' stream logs also go to files, kept with HC_INTEG_KEEP for a failure's post-mortem.
  const std::vector<ShimRankSpec> ranks = {
      rank(ShimLib::Nccl, *cudaDaemon, "main",
           {{"HC_FAKE_CUDA_DEVICES", "default"}, {"HC_FAKE_CUDA_LOG", dir.file("rank0-streams")}}),
      rank(ShimLib::Nccl, *cudaDaemon, "none",
           {{"HC_FAKE_CUDA_DEVICES", "default"}, {"HC_FAKE_CUDA_LOG", dir.file("rank1-streams")}}),
      rank(ShimLib::Rccl, *hipDaemon, "split", {{"HC_FAKE_HIP_LOG", dir.file("rank2-streams")}}),
  };
  const auto started = std::chrono::steady_clock::now();
  auto job = ShimJob::start(ranks, id, dir.path(), "stream", &error);
  ASSERT_NE(job, nullptr) << error;
  const std::string problems = job->expectAllPassed(kJobTimeout);
  EXPECT_EQ(problems, "") << "\n" << logs();
  if (!problems.empty()) return;
  for (int r = 0; r < job->nranks(); ++r) {
    const std::string out = job->rank(r).output();
    for (const std::string& check : checksOf(r)) {
      EXPECT_NE(out.find("ok " + check + ":"), std::string::npos)
          << "rank " << r << " did not report check " << check << ":\n"
          << out;
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::printf("ranks ran for %lld ms\n", static_cast<long long>(took.count()));
}

}  // namespace
}  // namespace hc::integ
