// Transport conformance, every backend: tags that differ in any bit of any field stay apart (two
// communicators whose identities share their low 16 bits, operations and chunks that differ only
// above the widths the fields had when a tag was one 64-bit word), and dropUnexpected() shows
// every unexpected message and drops exactly the ones its caller picks.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tests/unit/daemon/transport/transport_harness.h"

namespace hc::transport::testing {
namespace {

// Longer than any backend's inline limit: travels as header + separate payload on UCX.
constexpr size_t kLarge = 100 * 1024;
constexpr size_t kSizes[] = {8, kLarge};

class TagMatchingTest : public TransportTest {
 protected:
  // Messages from a to b on `x` and on `y`, posted in every order, each reach only the receive
  // with their own tag. `y`'s message always goes first, so that a backend which confused the two
  // would hand it to `x`'s receive.
  void expectApart(const Tag& x, const Tag& y, size_t bytes) {
    SCOPED_TRACE("x " + tagString(x) + ", y " + tagString(y) + ", " + std::to_string(bytes) + " B");
    const std::vector<uint8_t> dataX = pattern(bytes, 1), dataY = pattern(bytes, 2);
    std::vector<uint8_t> gotX(bytes), gotY(bytes);
    auto expectReceived = [&](RequestId recv, std::vector<uint8_t>& got,
                              const std::vector<uint8_t>& data) {
      Result<size_t> received = finish(1, recv);
      ASSERT_TRUE(received.isOk()) << received.status().toString();
      EXPECT_EQ(*received, bytes);
      EXPECT_TRUE(got == data) << "the payload of the other tag";
      std::fill(got.begin(), got.end(), 0);
    };
    auto expectSent = [&](RequestId send) {
      Result<size_t> sent = finish(0, send);
      EXPECT_TRUE(sent.isOk()) << sent.status().toString();
    };

    // Both receives first.
    RequestId recvX = *b().postRecv(ba(), x, gotX.data(), bytes);
    RequestId recvY = *b().postRecv(ba(), y, gotY.data(), bytes);
    RequestId sendY = *a().postSend(ab(), y, dataY.data(), bytes);
    RequestId sendX = *a().postSend(ab(), x, dataX.data(), bytes);
    expectReceived(recvX, gotX, dataX);
    expectReceived(recvY, gotY, dataY);
    expectSent(sendY);
    expectSent(sendX);

    // Both sends first: y's message waits unmatched when x's receive is posted.
    sendY = *a().postSend(ab(), y, dataY.data(), bytes);
    sendX = *a().postSend(ab(), x, dataX.data(), bytes);
    harness_->flush(0, 1);
    expectReceived(*b().postRecv(ba(), x, gotX.data(), bytes), gotX, dataX);
    expectReceived(*b().postRecv(ba(), y, gotY.data(), bytes), gotY, dataY);
    expectSent(sendY);
    expectSent(sendX);

    // x's receive waits while y's message arrives, then takes its own.
    recvX = *b().postRecv(ba(), x, gotX.data(), bytes);
    sendY = *a().postSend(ab(), y, dataY.data(), bytes);
    harness_->flush(0, 1);
    EXPECT_FALSE(*b().test(recvX)) << "x's receive took y's message";
    sendX = *a().postSend(ab(), x, dataX.data(), bytes);
    expectReceived(recvX, gotX, dataX);
    expectReceived(*b().postRecv(ba(), y, gotY.data(), bytes), gotY, dataY);
    expectSent(sendY);
    expectSent(sendX);
  }
};

TEST_P(TagMatchingTest, CommunicatorsSharingTheLow16IdentityBitsStayApart) {
  const Tag first = makeTag(0x10001, 5, 2), second = makeTag(0x20001, 5, 2);
  for (size_t bytes : kSizes) {
    expectApart(first, second, bytes);
    expectApart(second, first, bytes);
    if (HasFatalFailure()) return;
  }
}

TEST_P(TagMatchingTest, SeqBitsAbove32AndChunkBitsAbove16Count) {
  const Tag base = makeTag(0x300, 7, 3);
  const Tag others[] = {
      makeTag(base.comm, base.seq | (1ull << 32), base.chunk),
      makeTag(base.comm, base.seq | (1ull << 63), base.chunk),
      makeTag(base.comm, base.seq, base.chunk | (1u << 16)),
      makeTag(base.comm, base.seq, base.chunk | (1u << 31)),
  };
  for (const Tag& other : others) {
    for (size_t bytes : kSizes) {
      expectApart(base, other, bytes);
      expectApart(other, base, bytes);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(TagMatchingTest, DiscardUnexpectedComparesWholeFields) {
  const std::vector<uint8_t> small = pattern(8, 1), large = pattern(kLarge, 2);
  std::vector<uint8_t> got(kLarge);
  const Tag stale = makeTag(0x10001, 1, 0);
  const Tag live = makeTag(0x20001, 1, 0);
  const Tag liveHighSeq = makeTag(0x20001, 1 | (1ull << 32), 0);
  RequestId sendStale = *a().postSend(ab(), stale, large.data(), large.size());
  RequestId sendLive = *a().postSend(ab(), live, large.data(), large.size());
  RequestId sendHighSeq = *a().postSend(ab(), liveHighSeq, small.data(), small.size());
  harness_->flush(0, 1);
  EXPECT_EQ(b().discardUnexpected(stale, kMatchComm), 1u);
  EXPECT_EQ(b().discardUnexpected(makeTag(0x20001, 1, 0), kMatchCommSeq), 1u);
  EXPECT_TRUE(finish(0, sendStale).isOk());
  EXPECT_TRUE(finish(0, sendLive).isOk());
  // The one whose seq differs only above bit 31 was not part of the operation dropped.
  Result<size_t> kept = finish(1, *b().postRecv(ba(), liveHighSeq, got.data(), got.size()));
  ASSERT_TRUE(kept.isOk()) << kept.status().toString();
  EXPECT_EQ(*kept, small.size());
  EXPECT_TRUE(finish(0, sendHighSeq).isOk());
}

using DropUnexpectedTest = TransportTest;

TEST_P(DropUnexpectedTest, ShowsEveryMessageAndDropsExactlyThePickedOnes) {
  harness_->attach(1);  // c, connected to everyone
  ASSERT_FALSE(HasFatalFailure());
  Transport& c = harness_->at(2);
  const PeerId cb = harness_->peer(2, 1), bc = harness_->peer(1, 2);
  const Tag t1 = makeTag(0x10001, 1, 0), t2 = makeTag(0x10001, 2, 0);
  const std::vector<uint8_t> large = pattern(kLarge, 1), small = pattern(8, 2);
  const std::vector<uint8_t> other = pattern(16, 3), fromC = pattern(24, 4);

  const auto before = std::chrono::steady_clock::now();
  // On (a, t1) the large message is older than the small one.
  RequestId sendLarge = *a().postSend(ab(), t1, large.data(), large.size());
  RequestId sendSmall = *a().postSend(ab(), t1, small.data(), small.size());
  RequestId sendOther = *a().postSend(ab(), t2, other.data(), other.size());
  RequestId sendC = *c.postSend(cb, t1, fromC.data(), fromC.size());
  harness_->flush(0, 1);
  harness_->flush(2, 1);
  const auto after = std::chrono::steady_clock::now();

  struct Expected {
    PeerId peer;
    Tag tag;
    size_t bytes;
  };
  const Expected expected[] = {{ba(), t1, large.size()},
                               {ba(), t1, small.size()},
                               {ba(), t2, other.size()},
                               {bc, t1, fromC.size()}};
  auto indexOf = [&](const std::vector<UnexpectedMessage>& seen, const Expected& e) {
    auto it = std::find_if(seen.begin(), seen.end(), [&](const UnexpectedMessage& m) {
      return m.peer == e.peer && m.tag == e.tag && m.bytes == e.bytes;
    });
    return it == seen.end() ? -1 : static_cast<int>(it - seen.begin());
  };

  // A predicate that keeps everything sees every message once, and drops none.
  std::vector<UnexpectedMessage> seen;
  const size_t none = b().dropUnexpected([&](const UnexpectedMessage& m) {
    seen.push_back(m);
    return false;
  });
  EXPECT_EQ(none, 0u);
  ASSERT_EQ(seen.size(), 4u);
  for (const Expected& e : expected) {
    const int i = indexOf(seen, e);
    ASSERT_GE(i, 0) << "not shown: peer " << e.peer << " tag " << tagString(e.tag) << " " << e.bytes
                    << " B";
    EXPECT_GE(seen[i].arrived, before) << tagString(e.tag);
    EXPECT_LE(seen[i].arrived, after) << tagString(e.tag);
  }
  // Oldest first per (peer, tag).
  const int largeAt = indexOf(seen, expected[0]), smallAt = indexOf(seen, expected[1]);
  EXPECT_LT(largeAt, smallAt);
  EXPECT_LE(seen[largeAt].arrived, seen[smallAt].arrived);

  // Drop the older message on (a, t1) and c's message on the same tag; keep the rest.
  std::vector<UnexpectedMessage> again;
  const size_t dropped = b().dropUnexpected([&](const UnexpectedMessage& m) {
    again.push_back(m);
    return m.tag == t1 && (m.bytes == large.size() || m.peer == bc);
  });
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(again.size(), 4u);
  // The sender of the dropped large message is released (its receiver never posted a receive);
  // every other send completes too.
  for (RequestId send : {sendLarge, sendSmall, sendOther}) {
    Result<size_t> sent = finish(0, send);
    EXPECT_TRUE(sent.isOk()) << sent.status().toString();
  }
  EXPECT_TRUE(harness_->finish(2, sendC).isOk());

  // The kept messages still match, in their order: (a, t1) now starts with the small one.
  std::vector<uint8_t> got(kLarge);
  Result<size_t> r = finish(1, *b().postRecv(ba(), t1, got.data(), got.size()));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(std::vector<uint8_t>(got.begin(), got.begin() + *r) == small);
  r = finish(1, *b().postRecv(ba(), t2, got.data(), got.size()));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(std::vector<uint8_t>(got.begin(), got.begin() + *r) == other);

  // The dropped ones are gone: receives on their (peer, tag) wait.
  RequestId fromA = *b().postRecv(ba(), t1, got.data(), got.size());
  RequestId fromCRecv = *b().postRecv(bc, t1, got.data(), got.size());
  harness_->flush(0, 1);
  harness_->flush(2, 1);
  EXPECT_FALSE(*b().test(fromA));
  EXPECT_FALSE(*b().test(fromCRecv));
  ASSERT_TRUE(b().cancel(fromA).isOk());
  ASSERT_TRUE(b().cancel(fromCRecv).isOk());
  EXPECT_EQ(finish(1, fromA).status().code(), Code::Unavailable);
  EXPECT_EQ(finish(1, fromCRecv).status().code(), Code::Unavailable);
  int calls = 0;
  EXPECT_EQ(b().dropUnexpected([&](const UnexpectedMessage&) { return ++calls > 0; }), 0u);
  EXPECT_EQ(calls, 0);

  // New traffic on a dropped tag flows, large messages included.
  RequestId send = *a().postSend(ab(), t1, large.data(), large.size());
  r = finish(1, *b().postRecv(ba(), t1, got.data(), got.size()));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(got == large);
  EXPECT_TRUE(finish(0, send).isOk());
}

INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, TagMatchingTest,
                         ::testing::Values(Backend::Loopback, Backend::Ucx), backendParamName);
INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, DropUnexpectedTest,
                         ::testing::Values(Backend::Loopback, Backend::Ucx), backendParamName);

}  // namespace
}  // namespace hc::transport::testing
