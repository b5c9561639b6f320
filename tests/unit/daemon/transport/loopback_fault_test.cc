// Loopback transport under failure: a killed or destroyed endpoint fails every pending request
// with it as Unavailable, refuses later ones, and each survivor's handler hears of it once.
#include <string>
#include <vector>

#include "tests/unit/daemon/transport/loopback_test_util.h"

namespace hc::transport::testing {
namespace {

constexpr Tag kTag = makeTag(9, 1, 0);

struct Failure {
  PeerId peer;
  Status why;
};

TEST_F(LoopbackTest, KillFailsPendingRequestsAndCallsTheHandlerOnce) {
  std::vector<Failure> seen;
  b().setPeerFailureHandler([&](PeerId peer, const Status& why) { seen.push_back({peer, why}); });
  const PeerId victim = a().id();
  uint8_t bufs[3] = {};
  std::vector<RequestId> recvs;
  for (uint8_t i = 0; i < 3; ++i) {
    recvs.push_back(*b().postRecv(victim, makeTag(9, 1, i), &bufs[i], 1));
  }
  uint8_t x = 1;
  RequestId send = *b().postSend(victim, kTag, &x, 1);  // final but not yet reported
  RequestId aRecv = *a().postRecv(b().id(), makeTag(9, 1, 10), &x, 1);

  ASSERT_TRUE(fabric_.kill(victim).isOk());
  for (RequestId r : recvs) {
    Result<size_t> outcome = finish(b(), r);
    EXPECT_EQ(outcome.status().code(), Code::Unavailable) << outcome.status().toString();
  }
  EXPECT_EQ(finish(b(), send).status().code(), Code::Unavailable);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer, victim);
  EXPECT_EQ(seen[0].why.code(), Code::Unavailable);

  // Future requests with the dead peer are refused, and it cannot be reached again.
  EXPECT_EQ(b().postSend(victim, kTag, &x, 1).status().code(), Code::Unavailable);
  EXPECT_EQ(b().postRecv(victim, kTag, &x, 1).status().code(), Code::Unavailable);
  EXPECT_EQ(b().connect(a().address()).status().code(), Code::Unavailable);
  // Killing again changes nothing: the handler is not called twice.
  ASSERT_TRUE(fabric_.kill(victim).isOk());
  EXPECT_EQ(b().progress(), 0u);
  EXPECT_EQ(seen.size(), 1u);

  // The victim itself sees its requests fail and its posts refused.
  EXPECT_EQ(finish(a(), aRecv).status().code(), Code::Unavailable);
  EXPECT_EQ(a().postSend(b().id(), kTag, &x, 1).status().code(), Code::Unavailable);
  EXPECT_EQ(fabric_.kill(12345).code(), Code::NotFound);
}

TEST_F(LoopbackTest, OnlyPeersConnectedToTheVictimAreNotified) {
  auto loner = fabric_.attach();  // attached, never connected to a
  ASSERT_TRUE(loner.isOk());
  int lonerCalls = 0, bCalls = 0;
  (*loner)->setPeerFailureHandler([&](PeerId, const Status&) { ++lonerCalls; });
  b().setPeerFailureHandler([&](PeerId, const Status&) { ++bCalls; });
  ASSERT_TRUE(fabric_.kill(a().id()).isOk());
  (*loner)->progress();
  b().progress();
  EXPECT_EQ(lonerCalls, 0);
  EXPECT_EQ(bCalls, 1);
}

TEST_F(LoopbackTest, HandlerMayCallBackIntoTheTransport) {
  const PeerId victim = a().id();
  bool disconnected = false;
  b().setPeerFailureHandler([&](PeerId peer, const Status&) {
    disconnected = b().disconnect(peer).isOk();  // runs without the fabric lock held
  });
  ASSERT_TRUE(fabric_.kill(victim).isOk());
  EXPECT_EQ(b().progress(), 1u);
  EXPECT_TRUE(disconnected);
  uint8_t x = 0;
  EXPECT_EQ(b().postSend(victim, kTag, &x, 1).status().code(), Code::NotFound);
}

TEST_F(LoopbackTest, DestroyedEndpointLooksLikeAFailedPeer) {
  std::vector<Failure> seen;
  b().setPeerFailureHandler([&](PeerId peer, const Status& why) { seen.push_back({peer, why}); });
  const PeerId gone = a().id();
  uint8_t got = 0;
  RequestId recv = *b().postRecv(gone, kTag, &got, 1);
  eps_[0].reset();
  EXPECT_EQ(finish(b(), recv).status().code(), Code::Unavailable);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer, gone);
  EXPECT_EQ(fabric_.kill(gone).code(), Code::Ok);  // already dead: a no-op
  eps_.erase(eps_.begin());
}

TEST_F(LoopbackTest, MessagesFromAKilledPeerAreDropped) {
  uint8_t x = 3, got = 0;
  ASSERT_TRUE(a().postSend(b().id(), kTag, &x, 1).isOk());  // waits unmatched at b
  ASSERT_TRUE(fabric_.kill(a().id()).isOk());
  EXPECT_EQ(b().postRecv(a().id(), kTag, &got, 1).status().code(), Code::Unavailable);
  EXPECT_EQ(b().discardUnexpected(Tag{}, Tag{}), 0u);  // nothing left to discard, of any tag
}

}  // namespace
}  // namespace hc::transport::testing
