// ControlService: hetero_comm.v1.Control with the callback API. GetNode answers from a NodeInfo
// taken at startup (plus the uptime); the other RPCs are declared in control.proto and answer
// UNIMPLEMENTED (the generated base class) until they are written.
#pragma once

#include <grpcpp/grpcpp.h>

#include "daemon/control/node_info.h"
#include "hetero_comm/v1/control.grpc.pb.h"

namespace hc::control {

class ControlService final : public hetero_comm::v1::Control::CallbackService {
 public:
  explicit ControlService(NodeInfo node) : node_(std::move(node)) {}

  // hetero_comm::v1::Control::CallbackService. Run on gRPC's callback threads; never block.
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* context,
                                    const hetero_comm::v1::GetNodeRequest* request,
                                    hetero_comm::v1::NodeInfo* response) override;

 private:
  const NodeInfo node_;  // read-only after construction: any thread may read it
};

// The protobuf form of `node`, with the uptime at `now`. Exposed for tests.
void toProto(const NodeInfo& node, std::chrono::steady_clock::time_point now,
             hetero_comm::v1::NodeInfo* out);

}  // namespace hc::control
