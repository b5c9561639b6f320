// The daemon's Health and Control services and hcctl, against real daemons: health statuses over
// Check and Watch (SERVING once started, NOT_SERVING when the SIGTERM drain starts), hcctl's
// grpc_health_probe exit codes, the device inventory and the node report.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "daemon/control/control_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/hcctl_run.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr const char* kCollectives = "hetero_comm.v1.Collectives";
constexpr const char* kPeers = "hetero_comm.v1.Peers";

std::string adminSocket(const DaemonProcess& d) { return d.dir() + "/run/hetero-commd-admin.sock"; }

std::unique_ptr<DaemonProcess> startDaemon(const std::vector<std::string>& args) {
  return startServingDaemon(args);
}

std::unique_ptr<grpc::health::v1::Health::Stub> healthStub(const std::string& target) {
  return grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

grpc::Status check(grpc::health::v1::Health::Stub& stub, const std::string& service,
                   HealthCheckResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest request;
  request.set_service(service);
  return stub.Check(&context, request, response);
}

TEST(ControlTest, EveryServiceIsServingOnceStarted) {
  auto d = startDaemon({"--set", "control.health_listen=127.0.0.1:0"});
  ASSERT_NE(d, nullptr);
  const int healthPort = listenerPort(*d, "health");
  ASSERT_GT(healthPort, 0) << d->logTail();
  for (const std::string& target :
       {"unix:" + adminSocket(*d), "127.0.0.1:" + std::to_string(healthPort)}) {
    auto stub = healthStub(target);
    for (const char* service : {"", kCollectives, kPeers}) {
      HealthCheckResponse response;
      grpc::Status status = check(*stub, service, &response);
      ASSERT_TRUE(status.ok()) << target << " '" << service << "': " << status.error_message();
      EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << target << " " << service;
    }
    HealthCheckResponse response;
    EXPECT_EQ(check(*stub, "no.such.Service", &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(d->stop(), 0);
}

TEST(ControlTest, WatchSeesNotServingWhenTheDrainStarts) {
  auto d = startDaemon({});
  ASSERT_NE(d, nullptr);
  auto stub = healthStub("unix:" + adminSocket(*d));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  HealthCheckRequest request;
  request.set_service(kCollectives);
  auto reader = stub->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  d->process().sendSignal(SIGTERM);
  ASSERT_TRUE(reader->Read(&response)) << "the stream ended before reporting the drain";
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response)) << "the stream ends when the daemon stops";
  reader->Finish();
  ASSERT_TRUE(d->process().waitExit(std::chrono::seconds(10)));
  EXPECT_EQ(d->process().exitCode(), 0) << d->logTail();
}

TEST(ControlTest, NonLoopbackControlListenerIsRefused) {
  std::string error;
  auto d = DaemonProcess::start({"--set", "control.listen=0.0.0.0:0"}, &error);
  ASSERT_EQ(d, nullptr);
  EXPECT_NE(error.find("TLS"), std::string::npos) << error;
}

TEST(HcctlTest, HealthExitCodesFollowGrpcHealthProbe) {
  auto d = startDaemon({"--set", "control.listen=127.0.0.1:0"});
  ASSERT_NE(d, nullptr);
  const int controlPort = listenerPort(*d, "control");
  ASSERT_GT(controlPort, 0) << d->logTail();
  const std::string socket = adminSocket(*d);

  HcctlRun live = hcctl({"--socket", socket, "health"}, d->dir());
  EXPECT_EQ(live.exitCode, 0) << live.output;
  EXPECT_NE(live.output.find("SERVING"), std::string::npos) << live.output;
  HcctlRun tcp = hcctl({"--address", "127.0.0.1:" + std::to_string(controlPort), "health",
                        "--service", kCollectives},
                       d->dir());
  EXPECT_EQ(tcp.exitCode, 0) << tcp.output;
  HcctlRun unknown = hcctl({"--socket", socket, "health", "--service", "no.such.Service"}, d->dir());
  EXPECT_EQ(unknown.exitCode, 3) << unknown.output;
  HcctlRun nobody = hcctl({"--socket", d->dir() + "/nobody.sock", "health"}, d->dir());
  EXPECT_EQ(nobody.exitCode, 2) << nobody.output;
  HcctlRun badArgs = hcctl({"health", "--no-such-flag"}, d->dir());
  EXPECT_EQ(badArgs.exitCode, 1) << badArgs.output;
  EXPECT_EQ(d->stop(), 0);
}

// Exit 4 needs a service that is up but not SERVING; a daemon passes through that state only for
// the instant of its drain, so this serves the daemon's own Health service in process.
TEST(HcctlTest, HealthExitsFourWhenNotServing) {
  control::ControlServerOptions options;
  options.listen = "127.0.0.1:0";
  auto server = control::ControlServer::start(options, control::NodeInfo{});
  ASSERT_TRUE(server.isOk()) << server.status().toString();
  (*server)->health().set(kCollectives, control::ServingStatus::NotServing);
  const test::TempDir dir("hc-hcctl");
  HcctlRun run = hcctl({"--address", "127.0.0.1:" + std::to_string((*server)->controlPort()),
                        "health", "--service", kCollectives, "--json"},
                       dir.path());
  EXPECT_EQ(run.exitCode, 4) << run.output;
  EXPECT_NE(run.output.find("NOT_SERVING"), std::string::npos) << run.output;
}

TEST(HcctlTest, DevicesListsTheSimulatedGpus) {
  auto d = startDaemon({"--set", "devices.sim.nvidia=2", "--set", "devices.sim.amd=1"});
  ASSERT_NE(d, nullptr);
  HcctlRun json = hcctl({"--socket", adminSocket(*d), "devices", "--json"}, d->dir());
  ASSERT_EQ(json.exitCode, 0) << json.output;
  nlohmann::json parsed = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json.output;
  std::set<std::string> ids;
  for (const auto& gpu : parsed.at("gpus")) {
    ids.insert(gpu.at("id").get<std::string>());
    EXPECT_EQ(gpu.at("backend"), "sim") << gpu.dump();
  }
  EXPECT_EQ(ids, (std::set<std::string>{"sim-nvidia:0", "sim-nvidia:1", "sim-amd:0"}))
      << json.output;

  HcctlRun table = hcctl({"--socket", adminSocket(*d), "devices"}, d->dir());
  ASSERT_EQ(table.exitCode, 0) << table.output;
  EXPECT_EQ(table.output.rfind("ID", 0), 0u) << table.output;
  for (const char* column : {"VENDOR", "MODEL", "VRAM", "BACKEND", "PCI", "NUMA", "sim-amd:0"}) {
    EXPECT_NE(table.output.find(column), std::string::npos) << column << "\n" << table.output;
  }
  EXPECT_EQ(d->stop(), 0);
}

TEST(HcctlTest, NodeReportsVersionBuildAndConfig) {
  auto d = startDaemon({"--set", "devices.sim.amd=1"});
  ASSERT_NE(d, nullptr);
  HcctlRun text = hcctl({"--socket", adminSocket(*d), "node"}, d->dir());
  ASSERT_EQ(text.exitCode, 0) << text.output;
  EXPECT_NE(text.output.find(std::string("hetero-commd ") + HC_VERSION), std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("sim-amd:0"), std::string::npos) << text.output;

  HcctlRun json = hcctl({"--socket", adminSocket(*d), "node", "--json"}, d->dir());
  ASSERT_EQ(json.exitCode, 0) << json.output;
  nlohmann::json node = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(node.is_discarded()) << json.output;
  EXPECT_EQ(node.at("version"), HC_VERSION);
  EXPECT_TRUE(node.at("build").contains("cuda"));
  EXPECT_EQ(node.at("clientSocket"), d->socketPath());
  EXPECT_NE(node.at("config").get<std::string>().find("[control]"), std::string::npos);

  HcctlRun config = hcctl({"--socket", adminSocket(*d), "node", "--config"}, d->dir());
  ASSERT_EQ(config.exitCode, 0) << config.output;
  EXPECT_NE(config.output.find("amd = 1"), std::string::npos) << config.output;
  EXPECT_EQ(d->stop(), 0);
}

}  // namespace
}  // namespace hc::integ
