// The seq field of the engine's inter-node messages (transport.h, Tag), every value exact:
//   bit 63 = 0   a collective and what runs beside it:
//     bits 60..0   the collective's sequence number in the communicator;
//     bit 62       kAgreeBit: its descriptor agreement and its verdict (whether every daemon
//                  staged its operands), which run before and after it;
//     bit 61       kNoticeSeq alone: failure notices and goodbyes between the daemons.
//   bit 63 = 1   a send/recv between two ranks (transferSeq):
//     bits 62..43  the sending rank, bits 42..23 the receiving rank (20 bits each: every rank
//                  below peer::kMaxRanks), bits 22..0 the transfer's sequence number in that
//                  (src, dst) pair, modulo 2^23. Transfers of one pair are posted in that pair's
//                  order on both ends and the transport matches one peer's messages with one tag
//                  in posting order, so a wrapped number still matches its own transfer.
// The slices of one collective (slice_staging.h) share its number: they run one after another on
// every daemon, and messages with one tag from one peer match in the order they were posted.
#pragma once

#include <cstdint>

#include "daemon/peer/peer_types.h"

namespace hc::session {

constexpr uint64_t kTransferBit = 1ull << 63;
constexpr uint64_t kAgreeBit = 1ull << 62;
constexpr uint64_t kNoticeSeq = 1ull << 61;
constexpr uint64_t kCollectiveSeqMask = kNoticeSeq - 1;
constexpr int kTransferSrcShift = 43;
constexpr int kTransferDstShift = 23;
constexpr uint64_t kTransferRankMask = (1ull << 20) - 1;
constexpr uint64_t kTransferSeqMask = (1ull << kTransferDstShift) - 1;
static_assert(peer::kMaxRanks - 1 <= kTransferRankMask, "a rank must fit its tag field");

constexpr uint64_t collectiveSeq(uint64_t seq) { return seq & kCollectiveSeqMask; }

// A send/recv's seq: names (src, dst) exactly and the pair's sequence number.
constexpr uint64_t transferSeq(uint32_t src, uint32_t dst, uint64_t pairSeq) {
  return kTransferBit | (uint64_t{src} & kTransferRankMask) << kTransferSrcShift |
         (uint64_t{dst} & kTransferRankMask) << kTransferDstShift | (pairSeq & kTransferSeqMask);
}

}  // namespace hc::session
