// HealthService: grpc.health.v1.Health over a HealthBoard, with the callback API. Our own rather
// than gRPC's default service so that Watch streams every change the IPC thread makes (SERVING
// when ready, NOT_SERVING when the SIGTERM drain starts), and a pending Watch holds no thread.
//
// Check: the name's status, NOT_FOUND for a name never set. Watch: the status at once, then each
// change; SERVICE_UNKNOWN for a name never set, and the stream stays open. When the board closes
// (the daemon stops), every Watch sends what it has not sent yet, then ends with UNAVAILABLE.
#pragma once

#include <atomic>

#include <grpcpp/grpcpp.h>

#include "daemon/control/health_board.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace hc::control {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // Borrowed: the board outlives the gRPC servers this service is registered with. At most
  // maxWatches Watch streams are open at once (each holds a subscription and a gRPC call); one
  // more ends at once with RESOURCE_EXHAUSTED.
  static constexpr int kDefaultMaxWatches = 256;
  explicit HealthService(HealthBoard& board, int maxWatches = kDefaultMaxWatches)
      : board_(board), maxWatches_(maxWatches) {}

  // grpc::health::v1::Health::CallbackService. Run on gRPC's callback threads; never block.
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  HealthBoard& board_;
  const int maxWatches_;
  std::atomic<int> watches_{0};  // open Watch streams; each decrements it when done
};

}  // namespace hc::control
