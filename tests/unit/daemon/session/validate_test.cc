// resolveOp and readExcludeList against a real session (socketpair + Hello + MemAlloc): buffer
// bounds, overflow, NCCL's in-place rules and partial overlap, roots, dtypes and operators, exclude
// lists.
#include "daemon/session/validate.h"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"

namespace hc::session {
namespace {

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    peer_.reset(sv[1]);
    session_ = std::make_shared<Session>(1, UniqueFd(sv[0]), PeerIdentity{});
    auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 1);
    ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(hello), {}, 8 << 20, 64 << 20, 16).isOk());
    auto welcome = receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true);
    ASSERT_TRUE(welcome.isOk());
    ASSERT_EQ(welcome->fds.size(), 2u);
    base_ = alloc(1 << 20);
  }

  uint64_t alloc(uint64_t bytes) {
    auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 2);
    f.bytes = bytes;
    EXPECT_TRUE(session_->handleFrame(ipc::frameBytes(f), {}, 0, 0, 0).isOk());
    auto reply = receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true);
    EXPECT_TRUE(reply.isOk());
    return ipc::frameAs<ipc::MemAllocReplyFrame>(reply->bytes).offset;
  }

  ipc::SubmitEntry entry(ipc::OpType type, uint64_t count, uint64_t send, uint64_t recv) {
    ipc::SubmitEntry e{};
    e.op = static_cast<uint8_t>(type);
    e.dtype = 7;  // float32
    e.redop = 0;
    e.root = 0;
    e.count = count;
    e.send.offset = send;
    e.recv.offset = recv;
    return e;
  }

  Status check(const ipc::SubmitEntry& e, int rank = 0, int nranks = 4) {
    return resolveOp(e, session_, rank, nranks).status();
  }

  UniqueFd peer_;
  SessionPtr session_;
  uint64_t base_ = 0;
};

TEST_F(ValidateTest, AcceptsDisjointAndExactInPlaceBuffers) {
  EXPECT_TRUE(check(entry(ipc::OpType::AllReduce, 1000, base_, base_ + 4096)).isOk());
  EXPECT_TRUE(check(entry(ipc::OpType::AllReduce, 1000, base_, base_)).isOk());
  // allgather in place: send == recv + rank * sendcount
  EXPECT_TRUE(check(entry(ipc::OpType::AllGather, 100, base_ + 2 * 400, base_), 2).isOk());
  // reduce-scatter in place: recv == send + rank * recvcount
  EXPECT_TRUE(check(entry(ipc::OpType::ReduceScatter, 100, base_, base_ + 3 * 400), 3).isOk());
}

TEST_F(ValidateTest, RejectsPartialOverlap) {
  Status s = check(entry(ipc::OpType::AllReduce, 1000, base_, base_ + 4));
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  EXPECT_EQ(check(entry(ipc::OpType::AllGather, 100, base_ + 400, base_), 2).code(),
            Code::InvalidArgument);
  EXPECT_EQ(check(entry(ipc::OpType::ReduceScatter, 100, base_, base_ + 400), 3).code(),
            Code::InvalidArgument);
}

TEST_F(ValidateTest, RejectsBuffersOutsideAllocations) {
  Status s = check(entry(ipc::OpType::AllReduce, (1 << 20) / 4 + 1, base_, base_));
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("not inside an allocation"), std::string::npos) << s.message();
  EXPECT_EQ(check(entry(ipc::OpType::AllReduce, 1, 0, 0)).code(), Code::InvalidArgument);
  EXPECT_EQ(check(entry(ipc::OpType::AllReduce, 1, ~0ull - 2, base_)).code(),
            Code::InvalidArgument);
  EXPECT_EQ(check(entry(ipc::OpType::AllReduce, 1, ipc::kNoBuffer, base_)).code(),
            Code::InvalidArgument);
}

TEST_F(ValidateTest, RejectsCountsThatOverflow) {
  Status s = check(entry(ipc::OpType::AllReduce, ~0ull / 2, base_, base_));
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("overflow"), std::string::npos) << s.message();
  EXPECT_EQ(check(entry(ipc::OpType::AllGather, ~0ull / 8, base_, base_)).code(),
            Code::InvalidArgument);
}

TEST_F(ValidateTest, RejectsBadRootDtypeAndOperator) {
  auto e = entry(ipc::OpType::Broadcast, 10, base_, base_);
  e.root = 4;
  EXPECT_NE(check(e).message().find("root"), std::string::npos);
  e.root = -1;
  EXPECT_EQ(check(e).code(), Code::InvalidArgument);
  e = entry(ipc::OpType::AllReduce, 10, base_, base_);
  e.dtype = 99;
  EXPECT_NE(check(e).message().find("dtype"), std::string::npos) << check(e).message();
  e.dtype = 7;
  e.redop = 17;
  EXPECT_NE(check(e).message().find("operator"), std::string::npos) << check(e).message();
}

TEST_F(ValidateTest, ZeroCountNeedsNoBuffers) {
  EXPECT_TRUE(check(entry(ipc::OpType::AllReduce, 0, ipc::kNoBuffer, ipc::kNoBuffer)).isOk());
  EXPECT_TRUE(check(entry(ipc::OpType::Barrier, 0, ipc::kNoBuffer, ipc::kNoBuffer)).isOk());
}

TEST_F(ValidateTest, NonRootBuffersThatTheOpIgnoresAreNotChecked) {
  auto bcast = entry(ipc::OpType::Broadcast, 10, ipc::kNoBuffer, base_);
  EXPECT_TRUE(check(bcast, 1).isOk());
  EXPECT_EQ(check(bcast, 0).code(), Code::InvalidArgument);  // the root must send
  auto reduce = entry(ipc::OpType::Reduce, 10, base_, ipc::kNoBuffer);
  EXPECT_TRUE(check(reduce, 1).isOk());
  EXPECT_EQ(check(reduce, 0).code(), Code::InvalidArgument);  // the root must receive
}

TEST_F(ValidateTest, TransfersNeedAPeerInRangeAndOnlyTheirOwnBuffer) {
  auto send = entry(ipc::OpType::Send, 10, base_, ipc::kNoBuffer);
  send.root = 3;
  EXPECT_TRUE(check(send).isOk());
  send.root = 4;
  EXPECT_NE(check(send).message().find("peer 4 is out of range"), std::string::npos);
  send.root = -1;
  EXPECT_EQ(check(send).code(), Code::InvalidArgument);
  auto recv = entry(ipc::OpType::Recv, 10, ipc::kNoBuffer, base_);
  recv.root = 2;
  EXPECT_TRUE(check(recv).isOk());
  recv.recv.offset = ipc::kNoBuffer;
  EXPECT_EQ(check(recv).code(), Code::InvalidArgument);
}

TEST_F(ValidateTest, AllToAllRefusesAnyOverlap) {
  // 4 ranks x 10 floats = 160 bytes per side.
  EXPECT_TRUE(check(entry(ipc::OpType::AllToAll, 10, base_, base_ + 160)).isOk());
  Status s = check(entry(ipc::OpType::AllToAll, 10, base_, base_));
  EXPECT_NE(s.message().find("cannot run in place"), std::string::npos) << s.message();
  EXPECT_EQ(check(entry(ipc::OpType::AllToAll, 10, base_, base_ + 100)).code(),
            Code::InvalidArgument);
}

TEST_F(ValidateTest, GatherAndScatterFollowTheInPlaceRulesAtTheRoot) {
  auto gather = entry(ipc::OpType::Gather, 100, base_ + 2 * 400, base_);
  gather.root = 2;
  EXPECT_TRUE(check(gather, 2).isOk()) << "root's send == recv + root * count";
  gather.send.offset = base_ + 400;
  EXPECT_EQ(check(gather, 2).code(), Code::InvalidArgument);
  EXPECT_TRUE(check(gather, 1).isOk()) << "a non-root's recv is not used";
  auto scatter = entry(ipc::OpType::Scatter, 100, base_, base_ + 400);
  scatter.root = 1;
  EXPECT_TRUE(check(scatter, 1).isOk()) << "root's recv == send + root * count";
  EXPECT_EQ(check(scatter, 1, 4).code(), Code::Ok);
  scatter.recv.offset = base_ + 4;
  EXPECT_EQ(check(scatter, 1).code(), Code::InvalidArgument);
}

TEST_F(ValidateTest, SplitColorMustBeNonNegativeOrNoColor) {
  auto split = entry(ipc::OpType::CommSplit, 0, ipc::kNoBuffer, ipc::kNoBuffer);
  split.splitColor = ipc::kSplitNoColor;
  EXPECT_TRUE(check(split).isOk());
  split.splitColor = 5;
  EXPECT_TRUE(check(split).isOk());
  split.splitColor = -7;
  EXPECT_NE(check(split).message().find("color -7"), std::string::npos);
}

TEST_F(ValidateTest, RefusesUnknownFlagsAndMisplacedScalarBuffers) {
  auto e = entry(ipc::OpType::AllReduce, 10, base_, base_);
  e.flags = 0x80;
  EXPECT_NE(check(e).message().find("unknown entry flags"), std::string::npos);
  e.flags = ipc::kEntryScalarInBuffer;
  EXPECT_NE(check(e).message().find("pre-multiplied"), std::string::npos) << "sum has no scalar";
  e.redop = static_cast<uint8_t>(ipc::RedOp::PreMulSum);
  e.scalar = base_ + 64;
  auto op = resolveOp(e, session_, 0, 4);
  ASSERT_TRUE(op.isOk()) << op.status().message();
  EXPECT_EQ(op->scalarSource, session_->segment()->at(base_ + 64));
  e.scalar = 0;  // the segment header, not an allocation
  EXPECT_EQ(check(e).code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc::session

namespace hc::session {
namespace {

TEST_F(ValidateTest, ExcludeListsAreReadOnceCheckedAndSorted) {
  auto shrink = entry(ipc::OpType::CommShrink, 3, base_, ipc::kNoBuffer);
  auto* list = reinterpret_cast<int32_t*>(session_->segment()->at(base_));
  auto read = [&](std::vector<int32_t> ranks, int self = 0, int nranks = 8) {
    std::copy(ranks.begin(), ranks.end(), list);
    shrink.count = ranks.size();
    return readExcludeList(shrink, *session_, nranks, self);
  };
  auto ok = read({5, 1, 3});
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<int>{1, 3, 5}));
  EXPECT_TRUE(read({})->empty());
  EXPECT_NE(read({1, 9}).status().message().find("rank 9 is out of range"), std::string::npos);
  EXPECT_NE(read({-1}).status().message().find("rank -1 is out of range"), std::string::npos);
  EXPECT_NE(read({2, 2}).status().message().find("rank 2 is excluded twice"), std::string::npos);
  EXPECT_NE(read({4}, 4).status().message().find("excludes itself"), std::string::npos);
  EXPECT_NE(read({1, 2, 3, 4}, 0, 4).status().message().find("none would remain"),
            std::string::npos);
  // The list must lie in the client's allocations, like any buffer.
  shrink.count = 2;
  shrink.send.offset = base_ + (1 << 20) - 4;
  EXPECT_NE(readExcludeList(shrink, *session_, 8, 0).status().message().find("exclude list"),
            std::string::npos);
}

}  // namespace
}  // namespace hc::session
