// The one place where hc::Status and grpc::Status meet: every gRPC service and client of the
// daemon converts here, with the table in grpc_status.cc.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>

#include "common/status.h"

namespace hc::control {

// What a service answers for `status`. Codes that have no gRPC counterpart of their own (device
// and transport errors) travel as the nearest one; the message carries the detail.
grpc::Status toGrpcStatus(const Status& status);

// What a caller of an RPC sees. `context` names the call, e.g. "Peer.Join at 10.0.0.1:7450", and
// prefixes the message; gRPC's own failures (unreachable peer, deadline, cancel) map here too.
Status fromGrpcStatus(const grpc::Status& status, std::string_view context);

// The table's two directions, exposed for tests.
grpc::StatusCode grpcCodeFor(Code code);
Code hcCodeFor(grpc::StatusCode code);

}  // namespace hc::control
