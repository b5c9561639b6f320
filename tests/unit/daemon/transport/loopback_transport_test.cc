// Loopback transport, what only it promises: exact report counts from progress(), an eventfd
// readable exactly while reports wait, and addresses bound to one fabric. The behaviour every
// backend shares is in the conformance suites (conformance_*_test.cc), run over loopback too.
#include <string>

#include "tests/unit/daemon/transport/loopback_test_util.h"

namespace hc::transport::testing {
namespace {

constexpr Tag kTag = makeTag(0x1234, 7, 3);

TEST(TagTest, FieldsTravelWholeAndMasksPickThem) {
  constexpr Tag tag = makeTag(0xfedcba9876543210ull, 0x0123456789abcdefull, 0xdeadbeef);
  EXPECT_EQ(tag.comm, 0xfedcba9876543210ull);
  EXPECT_EQ(tag.seq, 0x0123456789abcdefull);
  EXPECT_EQ(tag.chunk, 0xdeadbeefu);
  EXPECT_EQ(tagString(tag), "fedcba9876543210/123456789abcdef/deadbeef");
  // Each mask compares whole fields: a difference in any bit of a compared field counts.
  const Tag otherChunk = makeTag(tag.comm, tag.seq, tag.chunk ^ 0x80000000u);
  const Tag otherSeq = makeTag(tag.comm, tag.seq ^ (1ull << 63), tag.chunk);
  const Tag otherComm = makeTag(tag.comm ^ (1ull << 40), tag.seq, tag.chunk);
  EXPECT_TRUE(tagMatches(tag, tag, kMatchAll));
  EXPECT_FALSE(tagMatches(otherChunk, tag, kMatchAll));
  EXPECT_TRUE(tagMatches(otherChunk, tag, kMatchCommSeq));
  EXPECT_FALSE(tagMatches(otherSeq, tag, kMatchCommSeq));
  EXPECT_TRUE(tagMatches(otherSeq, tag, kMatchComm));
  EXPECT_FALSE(tagMatches(otherComm, tag, kMatchComm));
  EXPECT_TRUE(tagMatches(otherComm, tag, Tag{}));  // an empty mask matches everything
  EXPECT_NE(otherComm, tag);
  EXPECT_LT(makeTag(1, ~0ull, ~0u), makeTag(2, 0, 0));  // ordered by comm, then seq, then chunk
  // The hash sees every field and the peer.
  EXPECT_NE(hashTag(tag, 1), hashTag(otherChunk, 1));
  EXPECT_NE(hashTag(tag, 1), hashTag(otherSeq, 1));
  EXPECT_NE(hashTag(tag, 1), hashTag(otherComm, 1));
  EXPECT_NE(hashTag(tag, 1), hashTag(tag, 2));
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

}  // namespace
}  // namespace hc::transport::testing
