// The one table between hc::Status and grpc::Status.
#include "daemon/control/grpc_status.h"

#include <gtest/gtest.h>

namespace hc::control {
namespace {

TEST(GrpcStatusTest, CodesWithAGrpcCounterpartRoundTrip) {
  for (Code code :
       {Code::Ok, Code::InvalidArgument, Code::NotFound, Code::PermissionDenied, Code::Unavailable,
        Code::Timeout, Code::NoResource, Code::RemoteError, Code::Internal}) {
    EXPECT_EQ(hcCodeFor(grpcCodeFor(code)), code) << codeName(code);
  }
  EXPECT_EQ(grpcCodeFor(Code::Timeout), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(grpcCodeFor(Code::PermissionDenied), grpc::StatusCode::PERMISSION_DENIED);
}

TEST(GrpcStatusTest, EveryHcCodeHasAGrpcCode) {
  for (int32_t i = 1; i < kNumCodes; ++i) {
    EXPECT_NE(grpcCodeFor(static_cast<Code>(i)), grpc::StatusCode::OK) << i;
    EXPECT_NE(grpcCodeFor(static_cast<Code>(i)), grpc::StatusCode::UNKNOWN) << i;
  }
}

TEST(GrpcStatusTest, SharedGrpcCodesKeepThePreciseCodeInTheMessage) {
  grpc::Status s = toGrpcStatus({Code::DeviceError, "kernel failed"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(s.error_message(), "DeviceError: kernel failed");
  grpc::Status plain = toGrpcStatus(invalidArgument("bad rank"));
  EXPECT_EQ(plain.error_message(), "bad rank");
}

TEST(GrpcStatusTest, ForeignGrpcCodesMapToTheNearestHcCode) {
  EXPECT_EQ(hcCodeFor(grpc::StatusCode::UNAUTHENTICATED), Code::PermissionDenied);
  EXPECT_EQ(hcCodeFor(grpc::StatusCode::CANCELLED), Code::Unavailable);
  EXPECT_EQ(hcCodeFor(grpc::StatusCode::UNIMPLEMENTED), Code::NotFound);
  EXPECT_EQ(hcCodeFor(grpc::StatusCode::UNKNOWN), Code::Internal);
  EXPECT_EQ(hcCodeFor(static_cast<grpc::StatusCode>(99)), Code::Internal);
}

TEST(GrpcStatusTest, CallerSeesTheCallNamedInTheMessage) {
  Status s = fromGrpcStatus({grpc::StatusCode::UNAVAILABLE, "connection refused"},
                            "Peer.Join at 10.0.0.1:7450");
  EXPECT_EQ(s.code(), Code::Unavailable);
  EXPECT_EQ(s.message(), "Peer.Join at 10.0.0.1:7450: connection refused");
  EXPECT_TRUE(fromGrpcStatus(grpc::Status::OK, "x").isOk());
}

}  // namespace
}  // namespace hc::control
