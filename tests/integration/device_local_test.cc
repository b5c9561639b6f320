// Reductions among one daemon's ranks whose buffers all sit on one device run on that device
// (daemon/session/device_reduce.h): no staging copy at all. Shown with the sim device's copy
// fault (devices.sim.fail_copy_at=1: the first staging copy fails): allreduces of ranks that share
// a device succeed, the same job over two devices fails at its first op, and the whole matrix on
// one device matches the reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
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

TEST(DeviceLocalTest, RanksSharingADeviceReduceOnItWithoutStaging) {
  std::string error;
  auto daemon = DaemonProcess::start({"--set", "devices.sim.nvidia=2", "--set",
                                      "devices.sim.fail_copy_at=1"},
                                     &error);
  ASSERT_NE(daemon, nullptr) << error;

  auto shared = deviceJob(*daemon, "shared", {"sim:nvidia:0", "sim:nvidia:0"},
                          {"--mode", "deviceops", "--count", "4099", "--iters", "3"}, &error);
  ASSERT_NE(shared, nullptr) << error;
  ASSERT_TRUE(shared->waitAll(seconds(60))) << shared->report() << daemon->logTail();
  for (int r = 0; r < 2; ++r) {
    const std::string out = shared->rank(r).output();
    for (int op = 0; op < 3; ++op) {
      EXPECT_NE(out.find("op " + std::to_string(op) + " status=0 "), std::string::npos) << out;
    }
    EXPECT_NE(out.find("#wrong 0"), std::string::npos) << out;
  }

  // The control: over two devices the operands are staged, and the injected fault hits op 0.
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

// Every dtype, redop and count of the matrix (in place and out of place, zero and odd counts),
// three ranks on one device: reductions on the device, the other collectives staged.
TEST(DeviceLocalTest, WholeMatrixOnOneDeviceMatchesTheReference) {
  std::string error;
  auto daemon = DaemonProcess::start({"--set", "devices.sim.nvidia=1"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = deviceJob(*daemon, "matrix", {"sim:nvidia:0", "sim:nvidia:0", "sim:nvidia:0"},
                       {"--mode", "matrix", "--seed", "23", "--watchdog", "150"}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAll(seconds(170))) << job->report() << daemon->logTail();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(job->rank(r).exitCode(), 0) << job->rank(r).output();
    EXPECT_NE(job->rank(r).output().find("#wrong 0"), std::string::npos) << job->rank(r).output();
  }
  EXPECT_EQ(daemon->stop(), 0);
}

}  // namespace
}  // namespace hc::integ
