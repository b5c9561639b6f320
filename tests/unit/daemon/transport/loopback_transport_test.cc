// Loopback transport, what only it promises: exact report counts from progress(), an eventfd
// readable exactly while reports wait, and addresses bound to one fabric. The behaviour every
// backend shares is in the conformance suites (conformance_*_test.cc), run over loopback too.
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
