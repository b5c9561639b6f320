// Loopback transport: matching in both orders, exact (peer, tag) matching, truncation, zero-byte
// messages, the post -> progress -> test cycle, cancel, discard and the eventfd.
#include <cstring>
#include <numeric>
#include <string>

#include "tests/unit/daemon/transport/loopback_test_util.h"

namespace hc::transport::testing {
namespace {

constexpr uint64_t kTag = makeTag(0x1234, 7, 3);

TEST(TagTest, FieldsRoundTripAndMasksTileTheWord) {
  uint64_t tag = makeTag(0xbeef, 0xdeadc0de, 0xf00d);
  EXPECT_EQ(tagComm(tag), 0xbeef);
  EXPECT_EQ(tagSeq(tag), 0xdeadc0deu);
  EXPECT_EQ(tagChunk(tag), 0xf00d);
  EXPECT_EQ(kTagCommMask | kTagSeqMask | kTagChunkMask, ~0ull);
  EXPECT_EQ(kTagCommMask & kTagSeqMask, 0u);
  EXPECT_EQ(kTagSeqMask & kTagChunkMask, 0u);
  EXPECT_EQ(tag & kTagCommMask, makeTag(0xbeef, 0, 0));
}

TEST_F(LoopbackTest, SendBeforeRecvDeliversACopy) {
  std::string payload = "hello from a";
  Result<RequestId> send = a().postSend(b().id(), kTag, payload.data(), payload.size());
  ASSERT_TRUE(send.isOk()) << send.status().toString();
  Result<size_t> sent = finish(a(), *send);
  ASSERT_TRUE(sent.isOk());
  EXPECT_EQ(*sent, payload.size());
  payload.assign(payload.size(), 'X');  // the send completed, so the buffer is ours again

  std::string got(64, '\0');
  Result<RequestId> recv = b().postRecv(a().id(), kTag, got.data(), got.size());
  ASSERT_TRUE(recv.isOk());
  Result<size_t> received = finish(b(), *recv);
  ASSERT_TRUE(received.isOk()) << received.status().toString();
  EXPECT_EQ(got.substr(0, *received), "hello from a");
}

TEST_F(LoopbackTest, RecvBeforeSendDelivers) {
  std::vector<uint32_t> got(1000, 0), data(1000);
  std::iota(data.begin(), data.end(), 1u);
  Result<RequestId> recv = b().postRecv(a().id(), kTag, got.data(), got.size() * 4);
  ASSERT_TRUE(recv.isOk());
  EXPECT_EQ(b().progress(), 0u);
  EXPECT_FALSE(*b().test(*recv));
  Result<RequestId> send = a().postSend(b().id(), kTag, data.data(), data.size() * 4);
  ASSERT_TRUE(send.isOk());
  Result<size_t> received = finish(b(), *recv);
  ASSERT_TRUE(received.isOk());
  EXPECT_EQ(*received, data.size() * 4);
  EXPECT_EQ(got, data);
  EXPECT_TRUE(finish(a(), *send).isOk());
}

TEST_F(LoopbackTest, CompletionIsReportedByProgressAndReleasedByTest) {
  uint8_t x = 1;
  RequestId send = *a().postSend(b().id(), kTag, &x, 1);
  EXPECT_FALSE(*a().test(send));  // final inside the transport, but not reported yet
  EXPECT_EQ(a().progress(), 1u);
  EXPECT_EQ(a().progress(), 0u);
  EXPECT_TRUE(*a().test(send));
  EXPECT_EQ(a().test(send).status().code(), Code::NotFound);
  EXPECT_EQ(a().test(987654).status().code(), Code::NotFound);
}

TEST_F(LoopbackTest, SameTagMatchesInPostOrder) {
  for (uint8_t i = 0; i < 5; ++i) ASSERT_TRUE(a().postSend(b().id(), kTag, &i, 1).isOk());
  for (uint8_t i = 0; i < 5; ++i) {
    uint8_t got = 99;
    Result<size_t> r = finish(b(), *b().postRecv(a().id(), kTag, &got, 1));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(got, i);
  }
}

TEST_F(LoopbackTest, MatchesOnlyTheExactPeerAndTag) {
  attach(1);  // endpoint c, also connected to everyone
  LoopbackTransport& c = *eps_[2];
  uint32_t got = 0;
  RequestId recv = *b().postRecv(a().id(), kTag, &got, 4);
  uint32_t fromC = 1, otherTag = 2, right = 3;
  ASSERT_TRUE(c.postSend(b().id(), kTag, &fromC, 4).isOk());  // right tag, wrong peer
  ASSERT_TRUE(a().postSend(b().id(), kTag + 1, &otherTag, 4).isOk());
  ASSERT_TRUE(a().postSend(b().id(), kTag | kTagCommMask, &otherTag, 4).isOk());
  b().progress();
  EXPECT_FALSE(*b().test(recv));
  ASSERT_TRUE(a().postSend(b().id(), kTag, &right, 4).isOk());
  ASSERT_TRUE(finish(b(), recv).isOk());
  EXPECT_EQ(got, 3u);
  // The unmatched messages still wait for their own receives.
  ASSERT_TRUE(finish(b(), *b().postRecv(c.id(), kTag, &got, 4)).isOk());
  EXPECT_EQ(got, 1u);
  ASSERT_TRUE(finish(b(), *b().postRecv(a().id(), kTag + 1, &got, 4)).isOk());
  EXPECT_EQ(got, 2u);
}

TEST_F(LoopbackTest, LongerMessageFailsTheReceiveInBothOrders) {
  uint8_t data[16] = {}, small[8];
  // Send first.
  RequestId send = *a().postSend(b().id(), kTag, data, sizeof(data));
  Result<size_t> r = finish(b(), *b().postRecv(a().id(), kTag, small, sizeof(small)));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::TransportError);
  EXPECT_NE(r.status().message().find("16 B"), std::string::npos) << r.status().message();
  EXPECT_TRUE(finish(a(), send).isOk());  // the sender's part succeeded
  // Receive first.
  RequestId recv = *b().postRecv(a().id(), kTag, small, sizeof(small));
  ASSERT_TRUE(a().postSend(b().id(), kTag, data, sizeof(data)).isOk());
  EXPECT_EQ(finish(b(), recv).status().code(), Code::TransportError);
  // A shorter message is fine and reports its length.
  ASSERT_TRUE(a().postSend(b().id(), kTag, data, 3).isOk());
  Result<size_t> shorter = finish(b(), *b().postRecv(a().id(), kTag, small, sizeof(small)));
  ASSERT_TRUE(shorter.isOk());
  EXPECT_EQ(*shorter, 3u);
}

TEST_F(LoopbackTest, ZeroByteMessagesMatchInBothOrders) {
  RequestId send = *a().postSend(b().id(), kTag, nullptr, 0);
  Result<size_t> r = finish(b(), *b().postRecv(a().id(), kTag, nullptr, 0));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(*r, 0u);
  EXPECT_TRUE(finish(a(), send).isOk());
  uint8_t buf[4];
  RequestId recv = *b().postRecv(a().id(), kTag, buf, sizeof(buf));
  ASSERT_TRUE(a().postSend(b().id(), kTag, nullptr, 0).isOk());
  Result<size_t> r2 = finish(b(), recv);
  ASSERT_TRUE(r2.isOk());
  EXPECT_EQ(*r2, 0u);
  EXPECT_EQ(a().postSend(b().id(), kTag, nullptr, 1).status().code(), Code::InvalidArgument);
}

TEST_F(LoopbackTest, CancelWithdrawsAnUnmatchedReceiveOnly) {
  uint8_t cancelled = 0, got = 0, x = 42;
  RequestId recv = *b().postRecv(a().id(), kTag, &cancelled, 1);
  ASSERT_TRUE(b().cancel(recv).isOk());
  Result<size_t> r = finish(b(), recv);
  EXPECT_EQ(r.status().code(), Code::Unavailable);
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos);
  // The next message goes to a new receive, not into the cancelled buffer.
  ASSERT_TRUE(a().postSend(b().id(), kTag, &x, 1).isOk());
  RequestId second = *b().postRecv(a().id(), kTag, &got, 1);
  ASSERT_TRUE(b().cancel(second).isOk());  // already matched: no effect
  ASSERT_TRUE(finish(b(), second).isOk());
  EXPECT_EQ(got, 42);
  EXPECT_EQ(cancelled, 0);
  EXPECT_EQ(b().cancel(second).code(), Code::NotFound);  // released by test()
}

TEST_F(LoopbackTest, DiscardUnexpectedDropsOneCommunicatorsTraffic) {
  uint8_t x = 1, got = 0;
  for (uint32_t seq = 0; seq < 3; ++seq) {
    ASSERT_TRUE(a().postSend(b().id(), makeTag(1, seq, 0), &x, 1).isOk());
  }
  ASSERT_TRUE(a().postSend(b().id(), makeTag(2, 0, 0), &x, 1).isOk());
  EXPECT_EQ(b().discardUnexpected(makeTag(1, 0, 0), kTagCommMask), 3u);
  EXPECT_EQ(b().discardUnexpected(makeTag(1, 0, 0), kTagCommMask), 0u);
  RequestId stale = *b().postRecv(a().id(), makeTag(1, 0, 0), &got, 1);
  b().progress();
  EXPECT_FALSE(*b().test(stale));
  EXPECT_TRUE(finish(b(), *b().postRecv(a().id(), makeTag(2, 0, 0), &got, 1)).isOk());
  EXPECT_TRUE(b().cancel(stale).isOk());
}

TEST_F(LoopbackTest, EventFdIsReadableExactlyWhileReportsWait) {
  ASSERT_GE(b().eventFd(), 0);
  EXPECT_FALSE(readable(b().eventFd()));
  uint8_t got = 0, x = 5;
  RequestId recv = *b().postRecv(a().id(), kTag, &got, 1);
  EXPECT_FALSE(readable(b().eventFd()));  // posted, nothing to report
  ASSERT_TRUE(a().postSend(b().id(), kTag, &x, 1).isOk());
  EXPECT_TRUE(readable(b().eventFd()));
  EXPECT_TRUE(readable(a().eventFd()));  // the send's completion
  EXPECT_EQ(b().progress(), 1u);
  EXPECT_FALSE(readable(b().eventFd()));
  EXPECT_TRUE(*b().test(recv));
  a().progress();
  EXPECT_FALSE(readable(a().eventFd()));
  ASSERT_TRUE(fabric_.kill(a().id()).isOk());  // a failure is a report too
  EXPECT_TRUE(readable(b().eventFd()));
  EXPECT_EQ(b().progress(), 1u);
  EXPECT_FALSE(readable(b().eventFd()));
}

TEST_F(LoopbackTest, ConnectAndPostReportBadArguments) {
  LoopbackFabric other;
  auto stranger = other.attach();
  ASSERT_TRUE(stranger.isOk());
  EXPECT_EQ(a().connect((*stranger)->address()).status().code(), Code::InvalidArgument);
  EXPECT_EQ(a().connect(PeerAddress{{1, 2, 3}}).status().code(), Code::InvalidArgument);
  stranger.value().reset();
  uint8_t x = 0;
  EXPECT_EQ(a().postSend(999, kTag, &x, 1).status().code(), Code::NotFound);
  EXPECT_EQ(a().postRecv(999, kTag, &x, 1).status().code(), Code::NotFound);
  EXPECT_EQ(a().cancel(999).code(), Code::NotFound);
  EXPECT_EQ(a().name(), "loopback");
}

TEST_F(LoopbackTest, DisconnectFailsPendingRequestsWithoutTheHandler) {
  int calls = 0;
  b().setPeerFailureHandler([&](PeerId, const Status&) { ++calls; });
  uint8_t got = 0;
  RequestId recv = *b().postRecv(a().id(), kTag, &got, 1);
  ASSERT_TRUE(b().disconnect(a().id()).isOk());
  EXPECT_EQ(finish(b(), recv).status().code(), Code::Unavailable);
  EXPECT_EQ(b().postRecv(a().id(), kTag, &got, 1).status().code(), Code::NotFound);
  EXPECT_EQ(b().disconnect(a().id()).code(), Code::NotFound);
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(b().connect(a().address()).isOk());  // and back
  ASSERT_TRUE(a().postSend(b().id(), kTag, &got, 1).isOk());
  EXPECT_TRUE(finish(b(), *b().postRecv(a().id(), kTag, &got, 1)).isOk());
}

}  // namespace
}  // namespace hc::transport::testing
