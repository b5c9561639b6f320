// The seq field of the engine's messages between daemons (net_seq.h): a transfer names its
// (src, dst) pair exactly for every rank count a communicator may have, and never meets a
// collective, an agreement or a notice.
#include "daemon/session/net_seq.h"

#include <gtest/gtest.h>

#include <set>

namespace hc::session {
namespace {

TEST(NetSeqTest, PairsThatOnceSharedATagAtTwoHundredRanksNowDiffer) {
  // Under the old fold ((src * nranks + dst) & 0x7fff) both pairs gave 101 with 200 ranks.
  EXPECT_NE(transferSeq(0, 101, 0), transferSeq(164, 69, 0));
  EXPECT_NE(transferSeq(0, 101, 7), transferSeq(164, 69, 7));
}

TEST(NetSeqTest, EveryPairOfTwoHundredRanksHasItsOwnSeq) {
  std::set<uint64_t> seen;
  for (uint32_t src = 0; src < 200; ++src) {
    for (uint32_t dst = 0; dst < 200; ++dst) {
      if (src == dst) continue;
      EXPECT_TRUE(seen.insert(transferSeq(src, dst, 3)).second) << src << "->" << dst;
    }
  }
}

TEST(NetSeqTest, TheLargestRanksKeepTheirFields) {
  const uint32_t last = peer::kMaxRanks - 1;
  const uint64_t seq = transferSeq(last, last - 1, 5);
  EXPECT_EQ((seq >> kTransferSrcShift) & kTransferRankMask, last);
  EXPECT_EQ((seq >> kTransferDstShift) & kTransferRankMask, last - 1);
  EXPECT_EQ(seq & kTransferSeqMask, 5u);
  EXPECT_NE(transferSeq(last, 0, 5), transferSeq(0, last, 5));
  EXPECT_NE(transferSeq(last, last - 1, 5), transferSeq(last - 1, last, 5));
}

TEST(NetSeqTest, TransfersCollectivesAgreementsAndNoticesNeverMeet) {
  for (uint64_t op : {uint64_t{0}, uint64_t{1}, uint64_t{0xffffffff}, kCollectiveSeqMask}) {
    const uint64_t collective = collectiveSeq(op);
    EXPECT_EQ(collective & (kTransferBit | kAgreeBit | kNoticeSeq), 0u);
    EXPECT_NE(collective | kAgreeBit, collective);
    EXPECT_NE(collective, kNoticeSeq);
    EXPECT_NE(collective | kAgreeBit, kNoticeSeq);
    EXPECT_NE(transferSeq(0, 1, op) & kTransferBit, 0u);
  }
  // A collective's number is whole: 2^32 and 0 are different ops.
  EXPECT_NE(collectiveSeq(1ull << 32), collectiveSeq(0));
}

}  // namespace
}  // namespace hc::session
