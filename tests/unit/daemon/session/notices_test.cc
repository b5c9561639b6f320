// The notices between daemons (daemon/session/notices.h): what is encoded decodes the same, and
// a notice from a lying peer is refused with a reason, never trusted.
#include "daemon/session/notices.h"

#include <gtest/gtest.h>

#include <cstring>

namespace hc::session {
namespace {

// Ranks 0, 2, 4 on the daemon the goodbye came from; 1, 3, 5 here.
const std::vector<uint32_t> kSenders = {0, 2, 4};
const std::vector<bool> kLocal = {false, true, false, true, false, true};

TEST(NoticesTest, GoodbyeRoundTripsItsCounts) {
  const std::vector<Communicator::SentCount> counts = {{0, 1, 3}, {4, 5, 1ull << 40}};
  auto g = decodeGoodbye(encodeGoodbye(counts), kSenders, kLocal);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_TRUE(g->complete);
  ASSERT_EQ(g->counts.size(), 2u);
  EXPECT_EQ(g->counts[1].src, 4);
  EXPECT_EQ(g->counts[1].dst, 5);
  EXPECT_EQ(g->counts[1].sends, 1ull << 40);
}

TEST(NoticesTest, GoodbyeWithMoreCountsThanFitSaysItIsIncomplete) {
  std::vector<Communicator::SentCount> counts(1000, Communicator::SentCount{2, 3, 1});
  const auto notice = encodeGoodbye(counts);
  EXPECT_EQ(notice.size(), kNoticeBytes);
  auto g = decodeGoodbye(notice, kSenders, kLocal);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_FALSE(g->complete);
  EXPECT_GT(g->counts.size(), 100u);
  EXPECT_LT(g->counts.size(), counts.size());
}

TEST(NoticesTest, GoodbyeNamingRanksOutsideItsPairsIsRefused) {
  for (const auto& bad : {Communicator::SentCount{1, 3, 1},    // src lives here
                          Communicator::SentCount{0, 2, 1},    // dst lives on the sender's daemon
                          Communicator::SentCount{0, 99, 1},   // no such rank
                          Communicator::SentCount{-1, 1, 1}}) {
    auto g = decodeGoodbye(encodeGoodbye({bad}), kSenders, kLocal);
    EXPECT_FALSE(g.isOk()) << bad.src << "->" << bad.dst;
    EXPECT_EQ(g.status().code(), Code::InvalidArgument);
  }
}

TEST(NoticesTest, GoodbyeClaimingMoreCountsThanANoticeHoldsIsRefused) {
  auto notice = encodeGoodbye({});
  const uint32_t lie = 1u << 30;
  std::memcpy(notice.data() + 4, &lie, sizeof(lie));
  auto g = decodeGoodbye(notice, kSenders, kLocal);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("at most"), std::string::npos) << g.status().message();
}

TEST(NoticesTest, ShortOrUnterminatedNoticesDecodeSafely) {
  EXPECT_EQ(noticeKind(std::vector<uint8_t>(10, 'B')), 0);
  EXPECT_FALSE(decodeGoodbye(std::vector<uint8_t>(10, 'B'), kSenders, kLocal).isOk());
  std::vector<uint8_t> full(kNoticeBytes, 'x');
  full[0] = kNoticeFailure;
  EXPECT_EQ(failureText(full).size(), kNoticeBytes - 9);
  EXPECT_EQ(failureCode(full), Code::RemoteError) << "a code nobody sent is the sender's failure";
}

// A failure notice keeps its words and says whether a party went away (a rank's client died or
// aborted: Unavailable on every daemon) or the sending daemon failed otherwise (RemoteError).
TEST(NoticesTest, AFailureNoticeCarriesItsWordsAndWhetherAPartyWentAway) {
  const auto gone = encodeFailureNotice(unavailable("rank 3 aborted the communicator"));
  EXPECT_EQ(noticeKind(gone), kNoticeFailure);
  EXPECT_EQ(failureText(gone), "rank 3 aborted the communicator");
  EXPECT_EQ(failureCode(gone), Code::Unavailable);
  const auto mismatch = encodeFailureNotice(invalidArgument("op 1 mismatch, int32 vs float32"));
  EXPECT_EQ(failureText(mismatch), "op 1 mismatch, int32 vs float32");
  EXPECT_EQ(failureCode(mismatch), Code::RemoteError);
  const auto longText = encodeFailureNotice(Status(Code::Timeout, std::string(5000, 'y')));
  EXPECT_EQ(failureText(longText).size(), kNoticeBytes - 9);
}

}  // namespace
}  // namespace hc::session
