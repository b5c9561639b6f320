// makeNetOp's validation (each bad field is InvalidArgument and named), the calls out of order,
// and the contract that an op may not be destroyed while the transport holds its buffers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

class NetOpSpecTest : public ::testing::Test {
 protected:
  NetOpSpec allreduce() {
    NetOpSpec spec = cluster_.spec(0, NetOpKind::AllReduce);
    spec.dtype = Dtype{kFloat32};
    spec.redop = RedOp{kSum};
    spec.count = 16;
    spec.buffer = data_.data();
    return spec;
  }
  void expectRefused(const NetOpSpec& spec, const std::string& mentions) {
    Result<NetOpPtr> op = makeNetOp(spec);
    ASSERT_FALSE(op.isOk());
    EXPECT_EQ(op.status().code(), Code::InvalidArgument);
    EXPECT_NE(op.status().message().find(mentions), std::string::npos) << op.status().toString();
  }

  Cluster cluster_{3};
  std::vector<float> data_ = std::vector<float>(64);
};

TEST_F(NetOpSpecTest, RefusesEachBadFieldByName) {
  NetOpSpec spec = allreduce();
  spec.transport = nullptr;
  expectRefused(spec, "transport");
  spec = allreduce();
  spec.self = 3;
  expectRefused(spec, "self");
  spec = allreduce();
  spec.redop = RedOp{kAvg};  // no finalDivisor
  expectRefused(spec, "finalDivisor");
  spec = allreduce();
  spec.buffer = nullptr;
  expectRefused(spec, "buffer");
  spec = allreduce();
  spec.options.maxInFlight = 0;
  expectRefused(spec, "maxInFlight");
  spec = allreduce();
  spec.count = uint64_t{1} << 62;
  expectRefused(spec, "overflows");

  spec = allreduce();
  spec.kind = NetOpKind::Broadcast;
  spec.root = 5;
  expectRefused(spec, "root");
  spec.kind = NetOpKind::Send;
  spec.root = 0;  // ourselves
  expectRefused(spec, "peer node");

  spec = allreduce();
  spec.kind = NetOpKind::AllGather;
  spec.blockCounts = {4, 4};  // 3 nodes
  expectRefused(spec, "one per node");
  spec.blockCounts = {4, 4, 4};
  spec.blockOffsets = {0, 2, 8};  // node 0's block [0, 4) overlaps node 1's [2, 6)
  expectRefused(spec, "overlap");

  spec = allreduce();
  spec.kind = NetOpKind::AllToAll;
  spec.blockCounts = {4, 4, 4};
  spec.sendCounts = {4, 4, 4};
  spec.sendBuffer = data_.data() + 8;  // the receive buffer is data_[0, 12)
  expectRefused(spec, "overlap");
  spec.sendBuffer = data_.data() + 32;
  spec.sendCounts = {5, 4, 4};  // our own block: 5 to send, 4 to receive
  expectRefused(spec, "differ");

  // The hooks of a staged transfer belong to one side of it each, and a ring to send and recv.
  spec = allreduce();
  spec.sendReady = [] { return size_t{0}; };
  expectRefused(spec, "sendReady is for send");
  spec = allreduce();
  spec.onSent = [](size_t, size_t) {};
  expectRefused(spec, "onSent is for send");
  spec = allreduce();
  spec.onLanded = [](size_t, size_t) {};
  expectRefused(spec, "onLanded is for recv");
  spec = allreduce();
  spec.recvReady = [] { return size_t{0}; };
  expectRefused(spec, "recvReady is for recv");
  spec = allreduce();
  spec.options.chunkBytes = 1024;
  spec.ringBytes = 4096;
  expectRefused(spec, "only send and recv take a ring");
  spec.kind = NetOpKind::Send;
  spec.root = 1;
  spec.ringBytes = 4000;
  expectRefused(spec, "not a multiple of chunkBytes");
}

TEST_F(NetOpSpecTest, AcceptsZeroCountsAndFinishesWithoutTraffic) {
  NetOpSpec spec = allreduce();
  spec.count = 0;
  spec.buffer = nullptr;
  Result<NetOpPtr> op = makeNetOp(spec);
  ASSERT_TRUE(op.isOk()) << op.status().toString();
  ASSERT_TRUE((*op)->start().isOk());
  Result<bool> done = (*op)->progress();
  ASSERT_TRUE(done.isOk());
  EXPECT_TRUE(*done);  // no peer was needed
}

TEST_F(NetOpSpecTest, CallsOutOfOrderAreErrors) {
  Result<NetOpPtr> op = makeNetOp(allreduce());
  ASSERT_TRUE(op.isOk());
  EXPECT_EQ((*op)->progress().status().code(), Code::InvalidArgument);  // before start()
  ASSERT_TRUE((*op)->start().isOk());
  EXPECT_EQ((*op)->start().code(), Code::InvalidArgument);  // twice
  (*op)->abort(unavailable("done testing"));
  for (int i = 0; i < 10; ++i) {
    cluster_.endpoint(0).progress();
    Result<bool> done = (*op)->progress();
    if (!done.isOk()) break;
  }
  EXPECT_EQ((*op)->progress().status().message(), "done testing");
}

TEST_F(NetOpSpecTest, DestroyingAnOpWhoseRequestsArePendingIsFatal) {
  EXPECT_DEATH(
      {
        Result<NetOpPtr> op = makeNetOp(allreduce());
        HC_CHECK(op.isOk() && (*op)->start().isOk());
        op.value().reset();  // receives are still posted into its scratch
      },
      "phase_");
}

}  // namespace
}  // namespace hc::coll::net::testing
