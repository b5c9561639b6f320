// Transport conformance, every backend: disconnect, a peer that goes away, the failure handler,
// and the event fd that wakes an idle owner.
#include <poll.h>

#include <vector>

#include "tests/unit/daemon/transport/transport_harness.h"

namespace hc::transport::testing {
namespace {

constexpr Tag kTag = makeTag(9, 1, 0);
constexpr size_t kLarge = 1 << 20;

struct Failure {
  PeerId peer;
  Status why;
};

using FailureTest = TransportTest;

TEST_P(FailureTest, DisconnectFailsPendingRequestsWithoutTheHandler) {
  int aCalls = 0, bCalls = 0;
  a().setPeerFailureHandler([&](PeerId, const Status&) { ++aCalls; });
  b().setPeerFailureHandler([&](PeerId, const Status&) { ++bCalls; });
  uint8_t got = 0;
  std::vector<uint8_t> large = pattern(kLarge, 1);
  RequestId recv = *b().postRecv(ba(), kTag, &got, 1);
  // A send a never receives: it holds b's buffer until a drops the message.
  RequestId send = *b().postSend(ba(), kTag, large.data(), large.size());
  ASSERT_TRUE(b().disconnect(ba()).isOk());
  EXPECT_EQ(finish(1, recv).status().code(), Code::Unavailable);
  ASSERT_TRUE(harness_->driveUntil([&] { return a().discardUnexpected(kTag, kMatchAll) == 1; }));
  EXPECT_EQ(finish(1, send).status().code(), Code::Unavailable);
  EXPECT_EQ(b().postRecv(ba(), kTag, &got, 1).status().code(), Code::NotFound);
  EXPECT_EQ(b().disconnect(ba()).code(), Code::NotFound);

  Result<PeerId> back = b().connect(harness_->address(0));  // and back, under the same id
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(*back, ba());
  uint8_t x = 7;
  ASSERT_TRUE(a().postSend(ab(), kTag, &x, 1).isOk());
  Result<size_t> r = finish(1, *b().postRecv(ba(), kTag, &got, 1));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(got, 7);
  ASSERT_TRUE(b().postSend(ba(), withChunk(kTag, 1), &x, 1).isOk());
  EXPECT_TRUE(finish(0, *a().postRecv(ab(), withChunk(kTag, 1), &got, 1)).isOk());
  harness_->driveUntil([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_EQ(aCalls, 0);  // a disconnect is not a failure, on either side
  EXPECT_EQ(bCalls, 0);
}

TEST_P(FailureTest, DestroyedPeerFailsPendingRequestsAndCallsTheHandlerOnce) {
  std::vector<Failure> seen;
  b().setPeerFailureHandler([&](PeerId peer, const Status& why) { seen.push_back({peer, why}); });
  uint8_t bufs[3] = {};
  std::vector<RequestId> recvs;
  for (uint8_t i = 0; i < 3; ++i) {
    recvs.push_back(*b().postRecv(ba(), withChunk(kTag, i), &bufs[i], 1));
  }
  std::vector<uint8_t> large = pattern(kLarge, 2), bigRecv(kLarge);
  RequestId send = *b().postSend(ba(), kTag, large.data(), large.size());
  // A large message from a that b takes only after a is gone.
  ASSERT_TRUE(a().postSend(ab(), withChunk(kTag, 5), large.data(), large.size()).isOk());

  harness_->destroy(0);
  ASSERT_TRUE(harness_->driveUntil([&] { return !seen.empty(); })) << "no failure reported";
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer, ba());
  EXPECT_EQ(seen[0].why.code(), Code::Unavailable);
  for (RequestId r : recvs) {
    Result<size_t> outcome = finish(1, r);
    EXPECT_EQ(outcome.status().code(), Code::Unavailable) << outcome.status().toString();
  }
  // The send never reached a receive; a backend that copied its payload at post may still call
  // it sent (loopback does), one that holds the caller's buffer must fail it.
  Result<size_t> sent = finish(1, send);
  EXPECT_TRUE(sent.isOk() || sent.status().code() == Code::Unavailable) << sent.status().toString();
  if (GetParam() == Backend::Ucx) {
    EXPECT_FALSE(sent.isOk());
  }

  // Later requests with the dead peer are refused, and it cannot be reached again.
  uint8_t x = 1;
  EXPECT_EQ(b().postSend(ba(), kTag, &x, 1).status().code(), Code::Unavailable);
  EXPECT_EQ(b().postRecv(ba(), withChunk(kTag, 5), bigRecv.data(), kLarge).status().code(),
            Code::Unavailable);
  EXPECT_EQ(b().connect(harness_->address(0)).status().code(), Code::Unavailable);
  harness_->driveUntil([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_EQ(seen.size(), 1u);  // once
}

TEST_P(FailureTest, OnlyPeersConnectedToTheVictimAreNotified) {
  harness_->attach(1);  // c, connected to a and b
  ASSERT_FALSE(HasFatalFailure());
  int bCalls = 0, cCalls = 0;
  b().setPeerFailureHandler([&](PeerId, const Status&) { ++bCalls; });
  harness_->at(2).setPeerFailureHandler([&](PeerId, const Status&) { ++cCalls; });
  ASSERT_TRUE(harness_->at(2).disconnect(harness_->peer(2, 0)).isOk());  // c leaves a first
  harness_->destroy(0);
  ASSERT_TRUE(harness_->driveUntil([&] { return bCalls > 0; }));
  harness_->driveUntil([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_EQ(bCalls, 1);
  EXPECT_EQ(cCalls, 0);
}

TEST_P(FailureTest, HandlerMayCallBackIntoTheTransport) {
  bool disconnected = false;
  b().setPeerFailureHandler([&](PeerId peer, const Status&) {
    disconnected = b().disconnect(peer).isOk();  // runs with nothing of the transport locked
  });
  harness_->destroy(0);
  ASSERT_TRUE(harness_->driveUntil([&] { return disconnected; }));
  uint8_t x = 0;
  EXPECT_EQ(b().postSend(ba(), kTag, &x, 1).status().code(), Code::NotFound);
}

TEST_P(FailureTest, EventFdWakesAnIdleOwner) {
  ASSERT_GE(b().eventFd(), 0);
  uint8_t got = 0, x = 5;
  RequestId recv = *b().postRecv(ba(), kTag, &got, 1);
  // Drain b: once progress() says there is nothing to do, its fd stays quiet...
  for (int i = 0; i < 100 && b().progress() != 0; ++i) {
  }
  EXPECT_FALSE(readable(b().eventFd()));
  EXPECT_FALSE(*b().test(recv));
  // ...until a's message arrives, which wakes it without anyone progressing b.
  RequestId send = *a().postSend(ab(), kTag, &x, 1);
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!readable(b().eventFd()) && std::chrono::steady_clock::now() < deadline) {
    a().progress();
    pollfd p{b().eventFd(), POLLIN, 0};
    ::poll(&p, 1, 10);
  }
  ASSERT_TRUE(readable(b().eventFd())) << "b was never woken";
  Result<size_t> r = finish(1, recv);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(got, 5);
  EXPECT_TRUE(finish(0, send).isOk());
}

INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, FailureTest,
                         ::testing::Values(Backend::Loopback, Backend::Ucx), backendParamName);

}  // namespace
}  // namespace hc::transport::testing
