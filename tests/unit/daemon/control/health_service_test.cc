// HealthService and ControlServer in process, over 127.0.0.1:0: Check, NOT_FOUND for an unknown
// name, Watch streaming each change, SERVICE_UNKNOWN, and Watch ending when the server shuts down.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <thread>
#include <vector>

#include "daemon/control/control_server.h"
#include "daemon/control/health_service.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hetero_comm/v1/control.grpc.pb.h"

namespace hc::control {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControlServerOptions options;
    options.listen = "127.0.0.1:0";
    NodeInfo node;
    node.version = "9.9.9";
    node.gpus.push_back({"sim-nvidia:0", "nvidia", "Sim", 1 << 30, "sim", "", -1, ""});
    auto server = ControlServer::start(options, node);
    ASSERT_TRUE(server.isOk()) << server.status().toString();
    server_ = std::move(server.value());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->controlPort()),
                                   grpc::InsecureChannelCredentials());
    stub_ = grpc::health::v1::Health::NewStub(channel_);
  }

  grpc::Status check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&context, request, response);
  }

  std::unique_ptr<ControlServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersTheBoardAndNotFoundForUnknownNames) {
  server_->health().set("", ServingStatus::Serving);
  server_->health().set(kCollectivesHealthName, ServingStatus::NotServing);
  HealthCheckResponse response;
  ASSERT_TRUE(check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(check(std::string(kCollectivesHealthName), &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check("no.such.Service", &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HealthServiceTest, WatchStreamsEveryChangeThenEndsAtShutdown) {
  server_->health().set(kCollectivesHealthName, ServingStatus::NotServing);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service(std::string(kCollectivesHealthName));
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  server_->health().set(kCollectivesHealthName, ServingStatus::Serving);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  server_->health().setAllNotServing();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  server_->shutdown();
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, WatchOfUnknownNameStaysOpenUntilTheNameAppears) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service("hetero_comm.v1.Later");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  server_->health().set("hetero_comm.v1.Later", ServingStatus::Serving);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(HealthServiceTest, GetNodeReportsTheSnapshotAndBoardRpcsWithoutABoardAreUnavailable) {
  auto control = hetero_comm::v1::Control::NewStub(channel_);
  grpc::ClientContext context;
  hetero_comm::v1::NodeInfo node;
  ASSERT_TRUE(control->GetNode(&context, hetero_comm::v1::GetNodeRequest(), &node).ok());
  EXPECT_EQ(node.version(), "9.9.9");
  ASSERT_EQ(node.gpus_size(), 1);
  EXPECT_EQ(node.gpus(0).id(), "sim-nvidia:0");
  grpc::ClientContext other;
  hetero_comm::v1::GetStatsResponse stats;
  // This server was given no status board: what needs one says so instead of answering empty.
  EXPECT_EQ(control->GetStats(&other, hetero_comm::v1::GetStatsRequest(), &stats).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// At most maxWatches streams at once: one more ends at once with RESOURCE_EXHAUSTED, and a slot
// freed (a stream cancelled) is a slot for the next.
TEST(HealthServiceCapTest, WatchStreamsBeyondTheCapAreRefusedAndFreedSlotsReused) {
  HealthBoard board;
  board.set("", ServingStatus::Serving);
  HealthService service(board, 2);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  HealthCheckRequest request;
  HealthCheckResponse response;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> open;
  auto watch = [&] {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    open.push_back(stub->Watch(contexts.back().get(), request));
    return open.back()->Read(&response);
  };
  ASSERT_TRUE(watch());
  ASSERT_TRUE(watch());
  EXPECT_FALSE(watch()) << "a third stream beyond the cap of 2";
  EXPECT_EQ(open.back()->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  contexts[0]->TryCancel();
  (void)open[0]->Finish();
  bool again = false;
  for (int i = 0; i < 100 && !again; ++i) {  // the server sees the cancel a moment later
    again = watch();
    if (!again) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(again) << "the cancelled stream's slot was not freed";
  for (auto& c : contexts) c->TryCancel();
  server->Shutdown();
}

}  // namespace
}  // namespace hc::control
