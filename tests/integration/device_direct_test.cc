// Device-direct transfers between daemons: a daemon probes at startup whether UCX takes each
// device's memory in place, and lends it to UCX for sends and receives when the probe passed.
// Sim devices with devices.sim.nic_direct stand in for GPUs behind a GPUDirect-capable NIC (sim
// memory is host memory, which this UCX moves); without it they stand in for GPUs without it.
// Checked through the whole matrix (its send/recv ring crosses daemons in both directions,
// between a daemon that lends in place and one that stages), the daemons' logs and /metrics.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "tests/integration/metrics_scrape.h"
#include "tests/integration/multi_daemon.h"

namespace hc::integ {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::vector<std::string> onDevice(int) { return {"--device", "sim:nvidia:0"}; }

const std::string kDirectGauge = "hetero_comm_device_direct{device=\"sim:nvidia:0\"}";
const std::string kDirectTransfers = "hetero_comm_device_direct_transfers_total";
const std::string kStagedTransfers =
    "hetero_comm_staging_fallback_total{reason=\"transport_host_only\"}";

TEST(DeviceDirectTest, TransfersGoInPlaceWhereTheProbePassedAndStageElsewhere) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "devices.sim.nvidia=1",      "--set", "devices.sim.copy_gbps=2",
                        "--set", "metrics.listen=127.0.0.1:0"};
  // Daemon 0's sim device is reachable in place; daemon 1's is a GPU without GPUDirect.
  options.perDaemonArgs = [](int d) {
    return std::vector<std::string>{
        "--set", std::string("devices.sim.nic_direct=") + (d == 0 ? "true" : "false")};
  };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  EXPECT_NE(cluster->daemon(0).log().find("device sim nvidia:0: transfers go device-direct"),
            std::string::npos)
      << cluster->daemon(0).log();
  EXPECT_NE(cluster->daemon(1).log().find("device sim nvidia:0: staged through host memory "
                                          "(its memory reaches a transport only through host "
                                          "copies)"),
            std::string::npos)
      << cluster->daemon(1).log();

  // Two ranks per daemon, every buffer on its daemon's sim device: the send/recv ring crosses
  // daemons from rank 1 to rank 2 (in place out of daemon 0, staged into daemon 1) and from
  // rank 3 to rank 0 (staged out of daemon 1, in place into daemon 0).
  auto job = ClusterJob::start(*cluster, "matrix", {0, 0, 1, 1},
                               {"--mode", "matrix", "--seed", "11", "--watchdog", "150"}, &error,
                               onDevice);
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(170));
  job.reset();

  const std::string direct =
      scrapeMetrics(loggedPort(cluster->daemon(0), "metrics listening on http://127.0.0.1:"));
  const std::string staged =
      scrapeMetrics(loggedPort(cluster->daemon(1), "metrics listening on http://127.0.0.1:"));
  EXPECT_EQ(metricSample(direct, kDirectGauge), 1) << direct;
  EXPECT_EQ(metricSample(staged, kDirectGauge), 0) << staged;
  // Daemon 0's large transfers went in place; its small ones (at most UCX's inline size) and all
  // of daemon 1's staged.
  EXPECT_GT(metricSample(direct, kDirectTransfers), 0) << direct;
  EXPECT_LE(metricSample(staged, kDirectTransfers), 0) << staged;
  EXPECT_GT(metricSample(staged, kStagedTransfers), metricSample(direct, kStagedTransfers))
      << direct << staged;
  for (int d = 0; d < cluster->size(); ++d) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

TEST(DeviceDirectTest, WithDevicesDirectOffEveryTransferStages) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "devices.sim.nvidia=1", "--set", "devices.sim.nic_direct=true",
                        "--set", "devices.direct=false", "--set", "metrics.listen=127.0.0.1:0"};
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "matrix", {0, 1},
                               {"--mode", "matrix", "--seed", "12", "--watchdog", "150"}, &error,
                               onDevice);
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(170));
  job.reset();
  for (int d = 0; d < cluster->size(); ++d) {
    const std::string m =
        scrapeMetrics(loggedPort(cluster->daemon(d), "metrics listening on http://127.0.0.1:"));
    EXPECT_EQ(metricSample(m, kDirectGauge), -1) << "not probed: " << m;
    EXPECT_LE(metricSample(m, kDirectTransfers), 0) << m;
    EXPECT_GT(metricSample(m, kStagedTransfers), 0) << m;
    EXPECT_EQ(cluster->daemon(d).log().find("device-direct"), std::string::npos);
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

// A ring of 4 MiB send/recvs between two daemons whose devices both go direct, so UCX holds
// device memory of both ranks when the victim (a rank's process, or the other daemon) dies. The
// survivor must end with an error within seconds, and its daemon must stay up and serve a new job
// (what UCX was lent stayed mapped until UCX let go of it).
void expectDeathMidDirectTransferFailsTheSurvivor(bool killDaemon) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  // Copies at 1 GB/s: staging costs the probe 2 ms per round trip, so in place wins clearly.
  options.daemonArgs = {
      "--set", "devices.sim.nvidia=1",        "--set", "devices.sim.copy_gbps=1",
      "--set", "devices.sim.nic_direct=true", "--set", "metrics.listen=127.0.0.1:0"};
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(
      *cluster, "direct-death", {0, 1},
      {"--mode", "devicesendrecv", "--count", "1048576", "--iters", "5000"}, &error, onDevice);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("op 1 status=0 wrong=0", seconds(60)))
      << job->report() << cluster->logTails();
  const auto killedAt = Clock::now();
  if (killDaemon) {
    cluster->daemon(1).kill9();
  } else {
    job->proc(1).sendSignal(SIGKILL);
  }
  // Within seconds the survivor's op fails as Unavailable (HC_UNAVAILABLE); the ops after it
  // fail too, each at once, however long that takes this machine.
  EXPECT_TRUE(job->proc(0).waitForOutput("status=6 ", seconds(10)))
      << job->report() << cluster->logTails();
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - killedAt).count(), 10000);
  EXPECT_TRUE(job->proc(0).waitExit(seconds(120))) << job->report() << cluster->logTails();
  const std::string out = job->proc(0).output();
  EXPECT_NE(out.find("op 4999 status="), std::string::npos) << out;
  EXPECT_EQ(out.find("op 4999 status=0 "), std::string::npos) << out;
  job.reset();
  const std::string metrics =
      scrapeMetrics(loggedPort(cluster->daemon(0), "metrics listening on http://127.0.0.1:"));
  EXPECT_GT(metricSample(metrics, kDirectTransfers), 0) << metrics;
  if (!killDaemon) {
    auto again = ClusterJob::start(
        *cluster, "after-death", {0, 1},
        {"--mode", "devicesendrecv", "--count", "1048577", "--iters", "3"}, &error, onDevice);
    ASSERT_NE(again, nullptr) << error;
    expectClusterJobSucceeds(*again, *cluster, seconds(60));
    again.reset();
    EXPECT_EQ(cluster->daemon(1).stop(), 0) << cluster->logTails();
  }
  EXPECT_EQ(cluster->daemon(0).stop(), 0) << cluster->logTails();
}

TEST(DeviceDirectTest, RankKilledMidDirectTransferFailsThePeerAndBothDaemonsServeOn) {
  expectDeathMidDirectTransferFailsTheSurvivor(false);
}

TEST(DeviceDirectTest, DaemonKilledMidDirectTransferFailsThePeerWithinSeconds) {
  expectDeathMidDirectTransferFailsTheSurvivor(true);
}

// Both daemons stage (a GPU without GPUDirect); daemon 1's device fails its 30th copy, one of the
// staging copies its progress thread runs beside the wire (1 MiB copies, about 12 per iteration
// of a 4 MiB send/recv ring). Op 2 fails on both ranks (the rank on daemon 0, whose half of the
// transfer was fine, gets an error instead of waiting for bytes that never come), and so does
// every op after it. Nothing hangs, and both daemons then serve a new job on the same device, with
// transfers long enough to go through a ring of staging.
TEST(DeviceDirectTest, ACopyFaultInAStagedTransferFailsBothRanksAndTheDaemonsServeOn) {
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.daemonArgs = {"--set", "devices.sim.nvidia=1",
                        "--set", "devices.sim.copy_gbps=2",
                        "--set", "devices.staging_chunk_bytes=1048576"};
  options.perDaemonArgs = [](int d) {
    return d == 1 ? std::vector<std::string>{"--set", "devices.sim.fail_copy_at=30"}
                  : std::vector<std::string>{};
  };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  auto job = ClusterJob::start(*cluster, "staged-fault", {0, 1},
                               {"--mode", "devicesendrecv", "--count", "1048576", "--iters", "8"},
                               &error, onDevice);
  ASSERT_NE(job, nullptr) << error;
  EXPECT_TRUE(job->waitAll(seconds(60))) << job->report() << cluster->logTails();
  for (int i = 0; i < job->size(); ++i) {
    SCOPED_TRACE("rank " + std::to_string(i));
    const std::string out = job->proc(i).output();
    EXPECT_NE(out.find("op 0 status=0 "), std::string::npos) << out;
    EXPECT_NE(out.find("op 7 status="), std::string::npos) << "every op ended: " << out;
    EXPECT_EQ(out.find("op 7 status=0 "), std::string::npos) << out;
    for (size_t at = out.find("wrong="); at != std::string::npos; at = out.find("wrong=", at + 1)) {
      EXPECT_EQ(out.compare(at, 8, "wrong=0 "), 0) << "a failed op reports, it does not corrupt";
    }
  }
  // Daemon 1 names the copy that failed. Its rank gets that DeviceError (HC_DEVICE_ERROR, 9)
  // unless daemon 0's failure, which the aborted half caused, reached daemon 1 first (one run in
  // several on a busy machine): then both ranks get the notices' RemoteError (8). Either way
  // the rank on daemon 0 learns that daemon 1 failed.
  const std::string log = cluster->daemon(1).log();
  EXPECT_NE(log.find("across daemons failed: staging copy "), std::string::npos) << log;
  EXPECT_NE(log.find("sim nvidia:0 failed: injected copy fault"), std::string::npos) << log;
  const std::string faulty = job->proc(1).output();
  const bool ownError = faulty.find("op 2 status=9 ") != std::string::npos;
  if (ownError) {
    EXPECT_NE(faulty.find("text=staging copy"), std::string::npos) << faulty;
  } else {
    EXPECT_NE(faulty.find("op 2 status=8 "), std::string::npos) << faulty;
  }
  // It hears it from the op's own failure notice or from daemon 1's failure of the communicator,
  // whichever reaches its op first; both name daemon 1. Its own op 2 may still have completed
  // (its send and receive were done before daemon 1's copy into the device failed): then op 3
  // is its first to fail.
  const std::string peer = job->proc(0).output();
  EXPECT_TRUE(peer.find("op 2 status=8 ") != std::string::npos ||
              (peer.find("op 2 status=0 ") != std::string::npos &&
               peer.find("op 3 status=8 ") != std::string::npos))
      << peer;
  EXPECT_TRUE(peer.find("node 1 failed this operation") != std::string::npos ||
              peer.find("the daemon of ranks 1 failed the communicator") != std::string::npos)
      << peer;
  job.reset();

  // 16 MB each way, through 4 MiB of staging per side (a ring of four 1 MiB copies, many laps).
  auto again = ClusterJob::start(*cluster, "after-fault", {0, 1},
                                 {"--mode", "devicesendrecv", "--count", "4000003", "--iters", "3"},
                                 &error, onDevice);
  ASSERT_NE(again, nullptr) << error;
  expectClusterJobSucceeds(*again, *cluster, seconds(60));
  again.reset();
  for (int d = 0; d < cluster->size(); ++d) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

}  // namespace
}  // namespace hc::integ
