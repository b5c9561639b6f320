// hcctl health: grpc.health.v1.Health/Check, with grpc_health_probe's exit codes.
#include <iostream>

#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/hcctl/commands.h"

namespace hc::hcctl {

int runHealth(const Target& target, const std::string& service, bool json) {
  auto channel = connect(target);
  if (!channel) return kExitConnectFailed;
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto context = rpcContext(target);
  grpc::Status status = stub->Check(context.get(), request, &response);
  const std::string shown = service.empty() ? "\"\" (the daemon)" : service;
  if (!status.ok()) {
    // NOT_FOUND: a service name the daemon does not report.
    std::cerr << "hcctl: health check of " << shown << " failed: " << status.error_message()
              << " (gRPC code " << status.error_code() << ")\n";
    return kExitRpcFailed;
  }
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  if (json) {
    std::cout << nlohmann::json{{"service", service}, {"status", name}}.dump() << "\n";
  } else {
    std::cout << "status: " << name << "\n";
  }
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                              : kExitNotServing;
}

}  // namespace hc::hcctl
