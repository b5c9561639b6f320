// Transport conformance, every backend: matching in both orders on exactly (peer, tag), post
// order within one tag, truncation, zero-byte messages, cancel and discard. How far apart tags
// stay, and dropUnexpected(), are in conformance_tags_test.cc.
#include <cstring>
#include <string>

#include "tests/unit/daemon/transport/transport_harness.h"

namespace hc::transport::testing {
namespace {

constexpr Tag kTag = makeTag(0x1234, 7, 3);
// Longer than any backend's inline limit: travels as header + separate payload on UCX.
constexpr size_t kLarge = 100 * 1024;

using MatchingTest = TransportTest;

TEST_P(MatchingTest, SendBeforeRecvDeliversACopy) {
  std::string payload = "hello from a";
  Result<RequestId> send = a().postSend(ab(), kTag, payload.data(), payload.size());
  ASSERT_TRUE(send.isOk()) << send.status().toString();
  Result<size_t> sent = finish(0, *send);
  ASSERT_TRUE(sent.isOk()) << sent.status().toString();
  EXPECT_EQ(*sent, payload.size());
  payload.assign(payload.size(), 'X');  // the send completed, so the buffer is ours again

  std::string got(64, '\0');
  Result<RequestId> recv = b().postRecv(ba(), kTag, got.data(), got.size());
  ASSERT_TRUE(recv.isOk());
  Result<size_t> received = finish(1, *recv);
  ASSERT_TRUE(received.isOk()) << received.status().toString();
  EXPECT_EQ(got.substr(0, *received), "hello from a");
}

TEST_P(MatchingTest, ReleasesARequestOnceItsFinalStateIsReported) {
  uint8_t x = 1;
  RequestId send = *a().postSend(ab(), kTag, &x, 1);
  ASSERT_TRUE(finish(0, send).isOk());
  EXPECT_EQ(a().test(send).status().code(), Code::NotFound);
  EXPECT_EQ(a().test(987654).status().code(), Code::NotFound);
  ASSERT_TRUE(finish(1, *b().postRecv(ba(), kTag, &x, 1)).isOk());
}

TEST_P(MatchingTest, SameTagMatchesInPostOrderAcrossSizes) {
  // Small and large messages interleaved on one tag: on UCX they take different paths.
  constexpr int kMessages = 6;
  auto sizeOf = [](int i) { return i % 2 ? kLarge + i : size_t(10 + i); };
  std::vector<std::vector<uint8_t>> sent(kMessages), got(kMessages);
  std::vector<RequestId> sends, recvs;
  for (int i = 0; i < kMessages; ++i) {
    sent[i] = pattern(sizeOf(i), i);
    sends.push_back(*a().postSend(ab(), kTag, sent[i].data(), sent[i].size()));
  }
  harness_->flush(0, 1);  // everything arrived before any receive is posted
  for (int i = 0; i < kMessages; ++i) {
    got[i].assign(kLarge + kMessages, 0);
    recvs.push_back(*b().postRecv(ba(), kTag, got[i].data(), got[i].size()));
  }
  for (int i = 0; i < kMessages; ++i) {
    Result<size_t> received = finish(1, recvs[i]);
    ASSERT_TRUE(received.isOk()) << i << ": " << received.status().toString();
    got[i].resize(*received);
    EXPECT_EQ(got[i], sent[i]) << "message " << i;
    EXPECT_TRUE(finish(0, sends[i]).isOk());
  }
  // And with every receive posted first.
  for (int i = 0; i < kMessages; ++i) {
    got[i].assign(kLarge + kMessages, 0);
    recvs[i] = *b().postRecv(ba(), kTag, got[i].data(), got[i].size());
  }
  for (int i = 0; i < kMessages; ++i) {
    sends[i] = *a().postSend(ab(), kTag, sent[i].data(), sent[i].size());
  }
  for (int i = 0; i < kMessages; ++i) {
    Result<size_t> received = finish(1, recvs[i]);
    ASSERT_TRUE(received.isOk()) << i << ": " << received.status().toString();
    got[i].resize(*received);
    EXPECT_EQ(got[i], sent[i]) << "message " << i;
    EXPECT_TRUE(finish(0, sends[i]).isOk());
  }
}

TEST_P(MatchingTest, MatchesOnlyTheExactPeerAndAllTagBits) {
  harness_->attach(1);  // c, connected to everyone
  ASSERT_FALSE(HasFatalFailure());
  Transport& c = harness_->at(2);
  const PeerId cb = harness_->peer(2, 1), bc = harness_->peer(1, 2);
  uint32_t got = 0;
  RequestId recv = *b().postRecv(ba(), kTag, &got, 4);
  uint32_t fromC = 1, otherChunk = 2, otherComm = 4, otherHighSeq = 5, right = 3;
  ASSERT_TRUE(c.postSend(cb, kTag, &fromC, 4).isOk());  // right tag, wrong peer
  ASSERT_TRUE(a().postSend(ab(), withChunk(kTag, kTag.chunk + 1), &otherChunk, 4).isOk());
  const Tag highComm = makeTag(kTag.comm | (1ull << 63), kTag.seq, kTag.chunk);
  ASSERT_TRUE(a().postSend(ab(), highComm, &otherComm, 4).isOk());
  // Differs only in the sequence's top bit: a backend that folded it away would match it.
  const Tag highSeq = makeTag(kTag.comm, kTag.seq | (1ull << 63), kTag.chunk);
  ASSERT_TRUE(a().postSend(ab(), highSeq, &otherHighSeq, 4).isOk());
  harness_->flush(2, 1);
  harness_->flush(0, 1);
  EXPECT_FALSE(*b().test(recv));
  ASSERT_TRUE(a().postSend(ab(), kTag, &right, 4).isOk());
  ASSERT_TRUE(finish(1, recv).isOk());
  EXPECT_EQ(got, 3u);
  // The unmatched messages still wait for their own receives.
  ASSERT_TRUE(finish(1, *b().postRecv(bc, kTag, &got, 4)).isOk());
  EXPECT_EQ(got, 1u);
  ASSERT_TRUE(finish(1, *b().postRecv(ba(), highSeq, &got, 4)).isOk());
  EXPECT_EQ(got, 5u);
  ASSERT_TRUE(finish(1, *b().postRecv(ba(), withChunk(kTag, kTag.chunk + 1), &got, 4)).isOk());
  EXPECT_EQ(got, 2u);
  ASSERT_TRUE(finish(1, *b().postRecv(ba(), highComm, &got, 4)).isOk());
  EXPECT_EQ(got, 4u);
}

TEST_P(MatchingTest, TwoSendersOnOneTagReachTheirOwnReceives) {
  harness_->attach(1);
  ASSERT_FALSE(HasFatalFailure());
  Transport& c = harness_->at(2);
  const PeerId cb = harness_->peer(2, 1), bc = harness_->peer(1, 2);
  for (size_t bytes : {size_t(64), kLarge}) {
    std::vector<uint8_t> fromA = pattern(bytes, 1), fromC = pattern(bytes, 2);
    std::vector<uint8_t> gotA(bytes), gotC(bytes);
    // c's message is posted first, to the receive posted last.
    RequestId recvC = *b().postRecv(bc, kTag, gotC.data(), bytes);
    ASSERT_TRUE(c.postSend(cb, kTag, fromC.data(), bytes).isOk());
    harness_->flush(2, 1);
    RequestId recvA = *b().postRecv(ba(), kTag, gotA.data(), bytes);
    ASSERT_TRUE(a().postSend(ab(), kTag, fromA.data(), bytes).isOk());
    ASSERT_TRUE(finish(1, recvA).isOk());
    ASSERT_TRUE(finish(1, recvC).isOk());
    EXPECT_EQ(gotA, fromA) << bytes;
    EXPECT_EQ(gotC, fromC) << bytes;
  }
}

TEST_P(MatchingTest, LongerMessageFailsTheReceiveInBothOrders) {
  for (size_t bytes : {size_t(16), kLarge}) {
    std::vector<uint8_t> data = pattern(bytes, 7), small(bytes / 2);
    // Send first.
    RequestId send = *a().postSend(ab(), kTag, data.data(), bytes);
    harness_->flush(0, 1);
    Result<size_t> r = finish(1, *b().postRecv(ba(), kTag, small.data(), small.size()));
    ASSERT_EQ(r.status().code(), Code::TransportError) << r.status().toString();
    EXPECT_NE(r.status().message().find(std::to_string(bytes) + " B"), std::string::npos)
        << r.status().message();
    EXPECT_TRUE(finish(0, send).isOk());  // the sender's part succeeded
    // Receive first.
    RequestId recv = *b().postRecv(ba(), kTag, small.data(), small.size());
    send = *a().postSend(ab(), kTag, data.data(), bytes);
    EXPECT_EQ(finish(1, recv).status().code(), Code::TransportError);
    EXPECT_TRUE(finish(0, send).isOk());
    // The connection carries on: a fitting message on the same tag arrives intact.
    std::vector<uint8_t> fits = pattern(small.size(), 8);
    ASSERT_TRUE(a().postSend(ab(), kTag, fits.data(), fits.size()).isOk());
    Result<size_t> shorter = finish(1, *b().postRecv(ba(), kTag, small.data(), small.size()));
    ASSERT_TRUE(shorter.isOk()) << shorter.status().toString();
    EXPECT_EQ(small, fits);
  }
}

TEST_P(MatchingTest, ZeroByteMessagesMatchInBothOrders) {
  RequestId send = *a().postSend(ab(), kTag, nullptr, 0);
  Result<size_t> r = finish(1, *b().postRecv(ba(), kTag, nullptr, 0));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(*r, 0u);
  EXPECT_TRUE(finish(0, send).isOk());
  uint8_t buf[4];
  RequestId recv = *b().postRecv(ba(), kTag, buf, sizeof(buf));
  ASSERT_TRUE(a().postSend(ab(), kTag, nullptr, 0).isOk());
  Result<size_t> r2 = finish(1, recv);
  ASSERT_TRUE(r2.isOk());
  EXPECT_EQ(*r2, 0u);
  EXPECT_EQ(a().postSend(ab(), kTag, nullptr, 1).status().code(), Code::InvalidArgument);
  EXPECT_EQ(b().postRecv(ba(), kTag, nullptr, 1).status().code(), Code::InvalidArgument);
}

TEST_P(MatchingTest, CancelWithdrawsAnUnmatchedReceiveOnly) {
  for (size_t bytes : {size_t(1), kLarge}) {
    std::vector<uint8_t> cancelled(bytes, 0), got(bytes, 0), data = pattern(bytes, 42);
    RequestId recv = *b().postRecv(ba(), kTag, cancelled.data(), bytes);
    ASSERT_TRUE(b().cancel(recv).isOk());
    Result<size_t> r = finish(1, recv);
    EXPECT_EQ(r.status().code(), Code::Unavailable);
    EXPECT_NE(r.status().message().find("cancelled"), std::string::npos);
    // The next message goes to a new receive, not into the cancelled buffer.
    RequestId send = *a().postSend(ab(), kTag, data.data(), bytes);
    harness_->flush(0, 1);
    RequestId second = *b().postRecv(ba(), kTag, got.data(), bytes);
    ASSERT_TRUE(b().cancel(second).isOk());  // already matched: no effect
    ASSERT_TRUE(finish(1, second).isOk());
    EXPECT_EQ(got, data);
    EXPECT_EQ(cancelled, std::vector<uint8_t>(bytes, 0));
    EXPECT_EQ(b().cancel(second).code(), Code::NotFound);  // released by test()
    EXPECT_TRUE(finish(0, send).isOk());
  }
}

TEST_P(MatchingTest, DiscardUnexpectedDropsOneCommunicatorsTraffic) {
  std::vector<uint8_t> small = pattern(8, 1), large = pattern(kLarge, 2), got(kLarge);
  std::vector<RequestId> sends;
  for (uint32_t seq = 0; seq < 3; ++seq) {
    const auto& data = seq == 1 ? large : small;
    sends.push_back(*a().postSend(ab(), makeTag(1, seq, 0), data.data(), data.size()));
  }
  RequestId keep = *a().postSend(ab(), makeTag(2, 0, 0), small.data(), small.size());
  harness_->flush(0, 1);
  EXPECT_EQ(b().discardUnexpected(makeTag(1, 0, 0), kMatchComm), 3u);
  EXPECT_EQ(b().discardUnexpected(makeTag(1, 0, 0), kMatchComm), 0u);
  // Dropping a message lets its sender finish, even one that waits for its receiver.
  for (RequestId send : sends) EXPECT_TRUE(finish(0, send).isOk());
  RequestId stale = *b().postRecv(ba(), makeTag(1, 1, 0), got.data(), got.size());
  harness_->flush(0, 1);
  EXPECT_FALSE(*b().test(stale));
  Result<size_t> kept = finish(1, *b().postRecv(ba(), makeTag(2, 0, 0), got.data(), got.size()));
  ASSERT_TRUE(kept.isOk());
  EXPECT_EQ(*kept, small.size());
  EXPECT_TRUE(finish(0, keep).isOk());
  // New traffic of the discarded communicator still flows.
  ASSERT_TRUE(a().postSend(ab(), makeTag(1, 1, 0), large.data(), large.size()).isOk());
  Result<size_t> fresh = finish(1, stale);
  ASSERT_TRUE(fresh.isOk()) << fresh.status().toString();
  EXPECT_EQ(got, large);
}

TEST_P(MatchingTest, ConnectIsIdempotentAndPostsCheckTheirArguments) {
  Result<PeerId> again = a().connect(harness_->address(1));
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(*again, ab());
  EXPECT_EQ(a().connect(PeerAddress{{1, 2, 3}}).status().code(), Code::InvalidArgument);
  EXPECT_EQ(a().connect(PeerAddress{}).status().code(), Code::InvalidArgument);
  uint8_t x = 0;
  EXPECT_EQ(a().postSend(999, kTag, &x, 1).status().code(), Code::NotFound);
  EXPECT_EQ(a().postRecv(999, kTag, &x, 1).status().code(), Code::NotFound);
  EXPECT_EQ(a().cancel(999).code(), Code::NotFound);
  EXPECT_EQ(a().name(), GetParam() == Backend::Loopback ? "loopback" : "ucx");
}

TEST_P(MatchingTest, SendsToItself) {
  const PeerId self = harness_->peer(0, 0);
  std::vector<uint8_t> data = pattern(kLarge, 5), got(kLarge);
  RequestId recv = *a().postRecv(self, kTag, got.data(), got.size());
  RequestId send = *a().postSend(self, kTag, data.data(), data.size());
  ASSERT_TRUE(finish(0, recv).isOk());
  ASSERT_TRUE(finish(0, send).isOk());
  EXPECT_EQ(got, data);
}

INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, MatchingTest,
                         ::testing::Values(Backend::Loopback, Backend::Ucx), backendParamName);

}  // namespace
}  // namespace hc::transport::testing
