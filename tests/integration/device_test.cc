// Jobs whose ranks' buffers live on simulated devices (hetero_comm/hc_sim.h) of different
// vendors, on daemons that each have their own sim devices ([devices.sim]), with every operation
// ordered on a sim stream: the device data path (staging through host memory in slices, and the
// combine of a node's operands on its devices before the wire), the stream-ordering protocol
// (done flags), injected device faults, and parties that die while a stream waits. Daemons talk
// over UCX tcp,self, as on separate nodes (multi_daemon.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/multi_daemon.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::vector<std::string> simDevices(int nvidia, int amd) {
  return {"--set", "devices.sim.nvidia=" + std::to_string(nvidia), "--set",
          "devices.sim.amd=" + std::to_string(amd)};
}

std::vector<std::string> deviceArg(const std::string& device) { return {"--device", device}; }

void stopAll(DaemonCluster& cluster) {
  for (int d = 0; d < cluster.size(); ++d) {
    EXPECT_EQ(cluster.daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster.logTails();
  }
}

// Runs the whole matrix with rank r on daemon nodes[r] and device devices[r], each daemon started
// with 65537-byte staging slices and the sim devices perDaemon(d) gives, and stops the daemons.
void expectMatrixAcrossDaemons(int daemons, std::function<std::vector<std::string>(int)> perDaemon,
                               const std::vector<int>& nodes,
                               const std::vector<std::string>& devices, const std::string& seed) {
  std::string error;
  ClusterOptions options;
  options.daemons = daemons;
  options.daemonArgs = {"--set", "devices.staging_chunk_bytes=65537"};
  options.perDaemonArgs = std::move(perDaemon);
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "matrix", nodes,
                               {"--mode", "matrix", "--seed", seed, "--watchdog", "150"}, &error,
                               [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(170));
  job.reset();
  stopAll(*cluster);
}

// Node A has two NVIDIA devices, node B two AMD devices, node C one of each (a workstation). Ranks
// sit on A's second NVIDIA device, B's second AMD device, and both of C's: node C reduces across
// vendors locally, and every hop between nodes joins memory of different vendors. Every op x
// dtype x redop x count of the matrix, in place and out of place, against independently computed
// results (worker_cases.cc). Four ranks: the seeded narrow-float data is exact at every hop for up
// to four ranks (worker_values.h); beyond that the per-hop rounding of fp8 sums across nodes
// differs from a single rounding by design (DESIGN.md, "Numerics"). Staging slices of 65537
// bytes cut the larger messages into slices whose last one is short (an fp32 allgather of 4097
// elements among four ranks runs as 4096 + 1 elements per block).
TEST(DeviceJobTest, MixedVendorJobOverThreeNodesMatchesTheReferenceForTheWholeMatrix) {
  expectMatrixAcrossDaemons(
      3,
      [](int d) {
        return d == 0 ? simDevices(2, 0) : d == 1 ? simDevices(0, 2) : simDevices(1, 1);
      },
      {0, 1, 2, 2}, {"sim:nvidia:1", "sim:amd:1", "sim:nvidia:0", "sim:amd:0"}, "11");
}

// The local combine on a device before the wire: on node B ranks 2 and 3 share an amd sim, so
// node B reduces each slice of theirs with the device kernel and stages one combined slice, not
// one per rank; on node A ranks 0 and 1 sit on two nvidia sims, which stage their own operands.
// The whole matrix, in 65537-byte slices, matches the reference.
TEST(DeviceJobTest, RanksSharingADeviceCombineOnItBeforeTheWire) {
  expectMatrixAcrossDaemons(
      2, [](int d) { return d == 0 ? simDevices(2, 0) : simDevices(0, 1); }, {0, 0, 1, 1},
      {"sim:nvidia:1", "sim:nvidia:0", "sim:amd:0", "sim:amd:0"}, "13");
}

// hc_alltoallv's zero-count patterns (nothing, only to self, a silent rank, a ring) with both
// sides in device memory of different vendors on two nodes, ordered on the ranks' streams.
TEST(DeviceJobTest, AllToAllVPatternsOnDeviceMemoryAcrossNodes) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.perDaemonArgs = [](int d) { return d == 0 ? simDevices(1, 0) : simDevices(0, 1); };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::vector<std::string> devices = {"sim:nvidia:0", "sim:nvidia:0", "sim:amd:0"};
  auto job = ClusterJob::start(*cluster, "alltoallv", {0, 0, 1},
                               {"--mode", "alltoallv", "--seed", "3", "--watchdog", "60"}, &error,
                               [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(90));
  job.reset();
  stopAll(*cluster);
}

// Slow copy engines (latency per copy, limited bandwidth) and a staging chunk that divides none
// of the messages: the grid's counts up to 1Mi+3 elements come out exact on both nodes.
TEST(DeviceJobTest, StagingUnderInjectedLatencyWithChunksThatDoNotDivideTheMessage) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "devices.sim.latency_us=150",
                        "--set", "devices.sim.copy_gbps=4",
                        "--set", "devices.staging_chunk_bytes=100003"};
  options.perDaemonArgs = [](int d) { return d == 0 ? simDevices(1, 0) : simDevices(0, 1); };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::vector<std::string> devices = {"sim:nvidia:0", "sim:amd:0"};
  auto job = ClusterJob::start(*cluster, "latency", {0, 1},
                               {"--mode", "grid", "--seed", "5", "--watchdog", "150"}, &error,
                               [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(170));
  job.reset();
  stopAll(*cluster);
}

// Where the ranks of a fault test sit: node (daemon) and device of each rank, and the ranks of
// node B as the verdict names them.
struct FaultLayout {
  std::vector<int> nodes = {0, 0, 1};
  std::vector<std::string> devices = {"sim:nvidia:0", "sim:amd:0", "sim:nvidia:0"};
  std::string nodeBRanks = "2";
};

// Node B (daemon 1) fails its `failAt`-th device copy (devices.sim.fail_copy_at) while the ranks
// of `layout` run `iters` int32 allreduces of `count` on their devices. On every rank of both
// nodes: the ops before `failedOp` succeed, op `failedOp` gets a DeviceError naming node B's
// ranks, no later op succeeds (the communicator is failed, as NCCL's is after an error), and
// every op ends (nothing hangs). Node B's last rank also hears which copy failed.
std::unique_ptr<DaemonCluster> expectCopyFaultFailsOneOp(std::vector<std::string> daemonArgs,
                                                         int failAt, int count, int iters,
                                                         int failedOp,
                                                         const FaultLayout& layout = {}) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = std::move(daemonArgs);
  options.perDaemonArgs = [failAt](int d) {
    std::vector<std::string> args = simDevices(1, 1);
    if (d == 1) {
      args.insert(args.end(), {"--set", "devices.sim.fail_copy_at=" + std::to_string(failAt)});
    }
    return args;
  };
  auto cluster = DaemonCluster::start(options, &error);
  EXPECT_NE(cluster, nullptr) << error;
  if (cluster == nullptr) return nullptr;
  auto job = ClusterJob::start(
      *cluster, "fault", layout.nodes,
      {"--mode", "deviceops", "--count", std::to_string(count), "--iters", std::to_string(iters)},
      &error, [&](int rank) { return deviceArg(layout.devices[rank]); });
  EXPECT_NE(job, nullptr) << error;
  if (job == nullptr) return cluster;
  EXPECT_TRUE(job->waitAll(seconds(60))) << job->report() << cluster->logTails();
  const auto op = [](int k) { return "op " + std::to_string(k) + " status="; };
  for (int i = 0; i < job->size(); ++i) {
    SCOPED_TRACE("rank " + std::to_string(job->spec(i).rank));
    const std::string out = job->proc(i).output();
    for (int k = 0; k < failedOp; ++k) EXPECT_NE(out.find(op(k) + "0 "), std::string::npos) << out;
    EXPECT_NE(out.find(op(failedOp) + "9 "), std::string::npos) << out;  // HC_DEVICE_ERROR
    EXPECT_NE(out.find("on the daemon of ranks " + layout.nodeBRanks), std::string::npos) << out;
    for (int k = failedOp + 1; k < iters; ++k) {
      EXPECT_EQ(out.find(op(k) + "0 "), std::string::npos) << out;
    }
    EXPECT_NE(out.find(op(iters - 1)), std::string::npos) << out;
    EXPECT_NE(out.find("#wrong 0"), std::string::npos) << out;
  }
  const std::string last = job->proc(job->size() - 1).output();
  EXPECT_NE(last.find("copy on sim nvidia:0 failed"), std::string::npos) << last;
  return cluster;
}

// With two copies per out-of-place allreduce that fits one slice, the 5th copy is op 2's copy
// in. Afterwards the daemons serve a new job.
TEST(DeviceJobTest, InjectedCopyFaultFailsThatOpOnEveryRankAndNothingHangs) {
  auto cluster = expectCopyFaultFailsOneOp({}, 5, 1000, 5, 2);
  ASSERT_NE(cluster, nullptr);
  std::string error;
  const std::vector<std::string> devices = {"sim:nvidia:0", "sim:amd:0"};
  auto again = ClusterJob::start(*cluster, "after-fault", {0, 1},
                                 {"--mode", "deviceops", "--count", "4099", "--iters", "3"}, &error,
                                 [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(again, nullptr) << error;
  expectClusterJobSucceeds(*again, *cluster, seconds(60));
  again.reset();
  stopAll(*cluster);
}

// The pipeline: 4097 int32 in slices of 4096 bytes is five slices (the last of one element), ten
// copies per op on node B (five in, five out). Its 15th copy fails in the middle of op 1, after
// earlier slices of that op went over the wire.
TEST(DeviceJobTest, CopyFaultInTheMiddleOfAPipelinedOpFailsThatOpOnEveryRank) {
  auto cluster =
      expectCopyFaultFailsOneOp({"--set", "devices.staging_chunk_bytes=4096"}, 15, 4097, 3, 1);
  ASSERT_NE(cluster, nullptr);
  stopAll(*cluster);
}

// Node B's two ranks share a device, so their slices are combined there: per op in one slice,
// node B copies one combined operand out and two results in (three copies; staged per rank it
// would be four). Its 4th copy is op 1's combined operand, before the wire (per rank it would
// be op 0's last result): the verdict fails op 1 on every rank of both nodes.
TEST(DeviceJobTest, CopyFaultInACombineOnTheDeviceFailsThatOpOnEveryRank) {
  FaultLayout layout;
  layout.nodes = {0, 1, 1};
  layout.devices = {"sim:amd:0", "sim:nvidia:0", "sim:nvidia:0"};
  layout.nodeBRanks = "1,2";
  auto cluster = expectCopyFaultFailsOneOp({}, 4, 1000, 3, 1, layout);
  ASSERT_NE(cluster, nullptr);
  stopAll(*cluster);
}

// A rank killed in the middle of pipelined ops: 1Mi int32 in 64 KiB slices, 1 ms per copy, keeps
// every op in slices for a while. The communicator fails on the victim's daemon while slices are
// under way; the ranks beside the victim and on the other daemon must end with an error within
// seconds, not wait on slices the other daemon abandoned.
TEST(DeviceJobTest, RankKilledMidPipelineFailsTheOtherRanksWithinSeconds) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "devices.staging_chunk_bytes=65536", "--set",
                        "devices.sim.latency_us=1000"};
  options.perDaemonArgs = [](int) { return simDevices(1, 1); };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::vector<std::string> devices = {"sim:nvidia:0", "sim:amd:0", "sim:nvidia:0"};
  auto job = ClusterJob::start(*cluster, "killed", {0, 1, 1},
                               {"--mode", "deviceops", "--count", "1048576", "--iters", "400"},
                               &error, [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("op 1 status=0 ", seconds(60)))
      << job->report() << cluster->logTails();
  const auto killedAt = Clock::now();
  job->proc(2).sendSignal(SIGKILL);
  for (int i : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(job->spec(i).rank));
    EXPECT_TRUE(job->proc(i).waitExit(seconds(10))) << job->report() << cluster->logTails();
    const auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count();
    EXPECT_LT(tookMs, 10000);
    const std::string out = job->proc(i).output();
    EXPECT_NE(out.find("op 399 status="), std::string::npos) << out;
    EXPECT_EQ(out.find("op 399 status=0 "), std::string::npos) << out;
  }
  job.reset();
  stopAll(*cluster);
}

// Rank 0's stream waits on an allreduce that rank 1 never joins; then a daemon dies. The stream
// must be released (the client sets the done flag itself when its own daemon is gone; the
// surviving daemon sets it when a peer daemon is) and the error must reach the communicator's
// asynchronous error, within seconds.
void expectStreamReleasedWhenADaemonDies(int victim) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.perDaemonArgs = [](int) { return simDevices(1, 0); };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job =
      ClusterJob::start(*cluster, "streamwait", {0, 1}, {"--mode", "streamwait", "--count", "1024"},
                        &error, [](int) { return deviceArg("sim:nvidia:0"); });
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->proc(0).waitForOutput("posted status=0", seconds(30))) << job->report();
  ASSERT_TRUE(job->proc(1).waitForOutput("idle", seconds(30))) << job->report();
  EXPECT_FALSE(job->proc(0).waitForOutput("stream status=", milliseconds(500)))
      << "the stream must wait while rank 1 has not posted\n"
      << job->report();
  const auto killedAt = Clock::now();
  cluster->daemon(victim).kill9();
  ASSERT_TRUE(job->proc(0).waitForOutput("result status=", seconds(10)))
      << job->report() << cluster->logTails();
  const auto tookMs = std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count();
  EXPECT_LT(tookMs, 6000);
  const std::string out = job->proc(0).output();
  EXPECT_EQ(out.find("result status=0"), std::string::npos) << out;
  if (victim == 0) {
    EXPECT_NE(out.find("result status=6"), std::string::npos) << out;
  }
}

TEST(DeviceStreamTest, StreamWaitingOnAnOpIsReleasedWhenItsOwnDaemonDies) {
  expectStreamReleasedWhenADaemonDies(0);
}

TEST(DeviceStreamTest, StreamWaitingOnAnOpIsReleasedWhenThePeerDaemonDies) {
  expectStreamReleasedWhenADaemonDies(1);
}

// A node with the CUDA toolkit's driver stub as libcuda.so.1 (every call answers
// CUDA_ERROR_STUB_LIBRARY): the daemon reports CUDA unavailable and why, and serves its sim
// devices as before. (No libcuda.so.1 at all is the case of every other test on this machine.)
TEST(DeviceDriverTest, CudaDriverStubIsReportedUnavailableAndSimMemoryStillServed) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  std::string error;
  const test::TempDir stubDir("hc-cuda-stub");
  const std::string& dir = stubDir.path();
  std::filesystem::create_symlink(stub, dir + "/libcuda.so.1");
  ClusterOptions options;
  options.daemons = 1;
  options.daemonArgs = simDevices(1, 1);
  options.commandPrefix = [&](int) {
    return std::vector<std::string>{"/usr/bin/env", "LD_LIBRARY_PATH=" + dir};
  };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::string log = cluster->daemon(0).log();
  EXPECT_NE(log.find("CUDA unavailable"), std::string::npos) << log;
  EXPECT_NE(log.find("STUB"), std::string::npos) << log;
  const std::vector<std::string> devices = {"sim:nvidia:0", "sim:amd:0"};
  auto job = ClusterJob::start(*cluster, "stub", {0, 0},
                               {"--mode", "deviceops", "--count", "5000", "--iters", "3"}, &error,
                               [&](int rank) { return deviceArg(devices[rank]); });
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(60));
  job.reset();
  stopAll(*cluster);
}

}  // namespace
}  // namespace hc::integ
