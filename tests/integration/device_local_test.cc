// Reductions among one daemon's ranks whose buffers all sit on devices of one vendor run on a
// device (daemon/staging/device_reduce.h): on the one device they share with no copy at all, or,
// across devices, on the device holding most operands after device-to-device copies of the
// others. Shown three ways:
//   - the sim device's copy fault (devices.sim.fail_copy_at=1: the first copy fails):
//     allreduces of ranks that share a device succeed, the same job over two devices fails at
//     its first op (its gathering copy);
//   - /metrics: hetero_comm_device_reductions_total{devices="several"} counts the reductions
//     across two nvidia sims, and a job over an nvidia and an amd sim takes the host path
//     (staging_fallback_total{reason="host_reduction"});
//   - the whole matrix on one device, and on two devices with windows that do not divide the
//     counts, matches the reference. A sim kernel refuses another device's memory, so a
//     reduction that read a peer's buffer in place would fail these.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/metrics_scrape.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

std::unique_ptr<RankJob> deviceJob(DaemonProcess& daemon, const std::string& name,
                                   const std::vector<std::string>& devices,
                                   std::vector<std::string> args, std::string* error) {
  return RankJob::start(daemon, name, static_cast<int>(devices.size()), std::move(args), error,
                        [devices](int rank) -> std::vector<std::string> {
                          return {"--device", devices[static_cast<size_t>(rank)]};
                        });
}

// Every rank of `job` reported ops 0..ops-1 succeeded and #wrong 0.
void expectOpsSucceeded(RankJob& job, int ranks, int ops) {
  for (int r = 0; r < ranks; ++r) {
    const std::string out = job.rank(r).output();
    for (int op = 0; op < ops; ++op) {
      EXPECT_NE(out.find("op " + std::to_string(op) + " status=0 "), std::string::npos) << out;
    }
    EXPECT_NE(out.find("#wrong 0"), std::string::npos) << out;
  }
}

TEST(DeviceLocalTest, RanksSharingADeviceReduceOnItWithoutStaging) {
  std::string error;
  auto daemon = DaemonProcess::start(
      {"--set", "devices.sim.nvidia=2", "--set", "devices.sim.fail_copy_at=1"}, &error);
  ASSERT_NE(daemon, nullptr) << error;

  auto shared = deviceJob(*daemon, "shared", {"sim:nvidia:0", "sim:nvidia:0"},
                          {"--mode", "deviceops", "--count", "4099", "--iters", "3"}, &error);
  ASSERT_NE(shared, nullptr) << error;
  ASSERT_TRUE(shared->waitAll(seconds(60))) << shared->report() << daemon->logTail();
  expectOpsSucceeded(*shared, 2, 3);

  // The control: over two devices the operands are gathered by copies, and the injected fault
  // hits op 0.
  auto split = deviceJob(*daemon, "split", {"sim:nvidia:0", "sim:nvidia:1"},
                         {"--mode", "deviceops", "--count", "4099", "--iters", "1"}, &error);
  ASSERT_NE(split, nullptr) << error;
  ASSERT_TRUE(split->waitAll(seconds(60))) << split->report() << daemon->logTail();
  for (int r = 0; r < 2; ++r) {
    const std::string out = split->rank(r).output();
    EXPECT_NE(out.find("op 0 status=9 "), std::string::npos) << out;  // HC_DEVICE_ERROR
  }
  EXPECT_EQ(daemon->stop(), 0);
}

TEST(DeviceLocalTest, DevicesOfOneVendorReduceOnADeviceAndTwoVendorsOnTheHost) {
  std::string error;
  auto daemon = DaemonProcess::start(
      {"--set", "devices.sim.nvidia=2", "--set", "devices.sim.amd=1", "--set",
       "metrics.listen=127.0.0.1:0", "--set", "devices.staging_chunk_bytes=4100"},
      &error);
  ASSERT_NE(daemon, nullptr) << error;
  const int port = loggedPort(*daemon, "metrics listening on http://127.0.0.1:");
  ASSERT_GT(port, 0) << daemon->logTail();
  const std::string several = "hetero_comm_device_reductions_total{devices=\"several\"}";
  const std::string hostPath = "hetero_comm_staging_fallback_total{reason=\"host_reduction\"}";

  // nvidia:1 holds four of the six operands: it reduces, after copies from nvidia:0 in windows
  // of 1025 elements (4100-byte chunks), the last of 4099 - 3 * 1025 = 1024.
  auto same = deviceJob(*daemon, "same-vendor", {"sim:nvidia:0", "sim:nvidia:1", "sim:nvidia:1"},
                        {"--mode", "deviceops", "--count", "4099", "--iters", "3"}, &error);
  ASSERT_NE(same, nullptr) << error;
  ASSERT_TRUE(same->waitAll(seconds(60))) << same->report() << daemon->logTail();
  expectOpsSucceeded(*same, 3, 3);
  std::string metrics = scrapeMetrics(port);
  EXPECT_EQ(metricSample(metrics, several), 3) << metrics;
  EXPECT_LE(metricSample(metrics, hostPath), 0) << metrics;

  auto mixed = deviceJob(*daemon, "two-vendors", {"sim:nvidia:0", "sim:amd:0"},
                         {"--mode", "deviceops", "--count", "4099", "--iters", "2"}, &error);
  ASSERT_NE(mixed, nullptr) << error;
  ASSERT_TRUE(mixed->waitAll(seconds(60))) << mixed->report() << daemon->logTail();
  expectOpsSucceeded(*mixed, 2, 2);
  metrics = scrapeMetrics(port);
  EXPECT_EQ(metricSample(metrics, several), 3) << metrics;
  EXPECT_EQ(metricSample(metrics, hostPath), 2) << metrics;
  EXPECT_EQ(daemon->stop(), 0);
}

// Runs the whole matrix (every dtype, redop and count, in place and out of place, zero and odd
// counts) with one rank per entry of `devices` on a daemon started with `daemonArgs`, and checks
// every rank's result against the reference.
void expectMatrixPasses(std::vector<std::string> daemonArgs,
                        const std::vector<std::string>& devices, const std::string& seed) {
  std::string error;
  auto daemon = DaemonProcess::start(std::move(daemonArgs), &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = deviceJob(*daemon, "matrix", devices,
                       {"--mode", "matrix", "--seed", seed, "--watchdog", "150"}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(170))) << job->report() << daemon->logTail();
  for (int r = 0; r < static_cast<int>(devices.size()); ++r) {
    EXPECT_EQ(job->rank(r).exitCode(), 0) << job->rank(r).output();
    EXPECT_NE(job->rank(r).output().find("#wrong 0"), std::string::npos) << job->rank(r).output();
  }
  EXPECT_EQ(daemon->stop(), 0);
}

// Three ranks on one device: reductions on the device, the other collectives staged.
TEST(DeviceLocalTest, WholeMatrixOnOneDeviceMatchesTheReference) {
  expectMatrixPasses({"--set", "devices.sim.nvidia=1"},
                     {"sim:nvidia:0", "sim:nvidia:0", "sim:nvidia:0"}, "23");
}

// Across two devices of one vendor, in windows of 65537 bytes' worth of elements, which do not
// divide the matrix's counts: every reduction gathers operands from the other device, including
// in-place reduce-scatters and reduces whose root is not on the reducing device.
TEST(DeviceLocalTest, WholeMatrixOnTwoDevicesOfOneVendorMatchesTheReference) {
  expectMatrixPasses({"--set", "devices.sim.amd=2", "--set", "devices.staging_chunk_bytes=65537"},
                     {"sim:amd:1", "sim:amd:0", "sim:amd:1"}, "29");
}

}  // namespace
}  // namespace hc::integ
