#include "daemon/control/grpc_status.h"

#include <string>

namespace hc::control {
namespace {

struct CodePair {
  Code hc;
  grpc::StatusCode grpc;
};

// hc::Code -> gRPC takes the first row naming the hc code; gRPC -> hc::Code takes the first row
// naming the gRPC code. The rows after the first block are one-directional on purpose.
constexpr CodePair kCodeTable[] = {
    // Both directions.
    {Code::Ok, grpc::StatusCode::OK},
    {Code::InvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {Code::NotFound, grpc::StatusCode::NOT_FOUND},
    {Code::PermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
    {Code::Unavailable, grpc::StatusCode::UNAVAILABLE},
    {Code::Timeout, grpc::StatusCode::DEADLINE_EXCEEDED},
    {Code::NoResource, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {Code::RemoteError, grpc::StatusCode::ABORTED},
    {Code::Internal, grpc::StatusCode::INTERNAL},
    // hc -> gRPC only: no gRPC code of their own; the message says which.
    {Code::DeviceError, grpc::StatusCode::INTERNAL},
    {Code::TransportError, grpc::StatusCode::UNAVAILABLE},
    // InProgress is not a result an RPC may end with: a bug in the service.
    {Code::InProgress, grpc::StatusCode::INTERNAL},
    // gRPC -> hc only: codes our services never send but gRPC or a foreign server may.
    {Code::PermissionDenied, grpc::StatusCode::UNAUTHENTICATED},
    {Code::Unavailable, grpc::StatusCode::CANCELLED},
    {Code::NotFound, grpc::StatusCode::UNIMPLEMENTED},  // the peer does not serve this method
    {Code::InvalidArgument, grpc::StatusCode::FAILED_PRECONDITION},
    {Code::InvalidArgument, grpc::StatusCode::OUT_OF_RANGE},
    {Code::InvalidArgument, grpc::StatusCode::ALREADY_EXISTS},
    {Code::Internal, grpc::StatusCode::UNKNOWN},
    {Code::Internal, grpc::StatusCode::DATA_LOSS},
    // hc -> gRPC only, after the row above that reads UNIMPLEMENTED back as NotFound (a method
    // the peer does not serve), which hcCodeFor finds first.
    {Code::Unsupported, grpc::StatusCode::UNIMPLEMENTED},
};

}  // namespace

grpc::StatusCode grpcCodeFor(Code code) {
  for (const CodePair& row : kCodeTable) {
    if (row.hc == code) return row.grpc;
  }
  return grpc::StatusCode::UNKNOWN;
}

Code hcCodeFor(grpc::StatusCode code) {
  for (const CodePair& row : kCodeTable) {
    if (row.grpc == code) return row.hc;
  }
  return Code::Internal;
}

grpc::Status toGrpcStatus(const Status& status) {
  if (status.isOk()) return grpc::Status::OK;
  grpc::StatusCode code = grpcCodeFor(status.code());
  // Keep the precise hc code visible when the gRPC code is shared with another one.
  if (hcCodeFor(code) != status.code()) {
    return {code, std::string(codeName(status.code())) + ": " + status.message()};
  }
  return {code, status.message()};
}

Status fromGrpcStatus(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return okStatus();
  std::string message(context);
  message += ": ";
  message += status.error_message().empty() ? "gRPC status " + std::to_string(status.error_code())
                                            : status.error_message();
  return {hcCodeFor(status.error_code()), std::move(message)};
}

}  // namespace hc::control
