// ControlSide's health lifecycle over the admin socket, as probes see it: starting (the daemon
// is up, Collectives not yet), serving (markReady), a lost peer daemon and its return (Peers),
// and the drain (everything NOT_SERVING, for good), over Check and over one Watch stream.
#include "daemon/server/control_side.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "daemon/server/devices.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/support/temp_dir.h"

namespace hc::server {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
constexpr const char* kCollectives = "hetero_comm.v1.Collectives";
constexpr const char* kPeers = "hetero_comm.v1.Peers";

class ControlSideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::makeTempDir("hc-control-side");
    ASSERT_FALSE(dir_.empty());
    config_.controlAdminSocket = dir_ + "/admin.sock";
    auto devices = buildDeviceRegistry(config_);
    ASSERT_TRUE(devices.isOk()) << devices.status().toString();
    devices_ = std::move(devices.value());
    deviceBoard_ = std::make_unique<discovery::DeviceBoard>(
        discovery::discoverInventory(devices_), devices_);
    auto side = ControlSide::start(config_, *deviceBoard_, "", &board_);
    ASSERT_TRUE(side.isOk()) << side.status().toString();
    side_ = std::move(side.value());
    stub_ = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel("unix:" + config_.controlAdminSocket, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    side_.reset();
    test::removeTempDir(dir_);
  }

  HealthCheckResponse::ServingStatus check(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    grpc::Status s = stub_->Check(&context, request, &response);
    EXPECT_TRUE(s.ok()) << service << ": " << s.error_message();
    return response.status();
  }

  std::string dir_;
  config::DaemonConfig config_;
  device::DeviceRegistry devices_;
  std::unique_ptr<discovery::DeviceBoard> deviceBoard_;  // after devices_, which it measures
  observe::StatusBoard board_;
  std::unique_ptr<ControlSide> side_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
};

TEST_F(ControlSideTest, StartingServingPeerLossAndDrainOverCheckAndWatch) {
  // Starting: the daemon answers, collectives are not ready yet.
  EXPECT_EQ(check(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(check(kCollectives), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check(kPeers), HealthCheckResponse::SERVING);

  grpc::ClientContext watchContext;
  watchContext.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  HealthCheckRequest request;
  request.set_service(kCollectives);
  auto watch = stub_->Watch(&watchContext, request);
  HealthCheckResponse seen;
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::NOT_SERVING);

  side_->markReady();
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::SERVING);
  EXPECT_EQ(check(kCollectives), HealthCheckResponse::SERVING);

  // A peer daemon lost, then back (a communicator formed with it again).
  side_->markPeers({"10.0.0.2:7710"});
  EXPECT_EQ(check(kPeers), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check(kCollectives), HealthCheckResponse::SERVING) << "local jobs still run";
  side_->markPeers({});
  EXPECT_EQ(check(kPeers), HealthCheckResponse::SERVING);

  // Draining: everything NOT_SERVING, and a peer coming back does not undo it.
  side_->markDraining();
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::NOT_SERVING);
  side_->markPeers({"10.0.0.2:7710"});
  side_->markPeers({});
  EXPECT_EQ(check(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check(kCollectives), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check(kPeers), HealthCheckResponse::NOT_SERVING);
  watchContext.TryCancel();
  while (watch->Read(&seen)) {
  }
  (void)watch->Finish();
}

}  // namespace
}  // namespace hc::server
