#include "tests/integration/in_process_daemon.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "tests/integration/daemon_process.h"

namespace hc::integ {
namespace {

class InProcessDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string error;
    daemon_ = DaemonProcess::start(
        {"--set", "session.max_ranks=" + std::to_string(kInProcessMaxRanks)}, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    ::setenv("HC_SOCKET", daemon_->socketPath().c_str(), 1);
  }
  // The daemon goes last: handles a failed test left behind only see their connection close.
  void TearDown() override { daemon_.reset(); }

 private:
  std::unique_ptr<DaemonProcess> daemon_;
};

[[maybe_unused]] ::testing::Environment* const kDaemon =
    ::testing::AddGlobalTestEnvironment(new InProcessDaemon);

}  // namespace
}  // namespace hc::integ
