// Sequence numbers of the engine's inter-node messages (the seq field of transport tags,
// transport.h): collectives use [0, 2^30 - 1); their descriptor agreement and their verdict
// (whether every daemon staged its operands) the same numbers with kAgreeBit; transfers the upper
// half with the rank pair folded in (engine_net.cc); kNoticeSeq carries failure notices.
// The slices of one collective (slice_staging.h) share its number: they run one after another on
// every daemon, and messages with one tag from one peer match in the order they were posted.
#pragma once

#include <cstdint>

namespace hc::session {

constexpr uint32_t kNoticeSeq = 0x7fffffffu;
constexpr uint32_t kAgreeBit = 0x40000000u;

inline uint32_t collectiveSeq(uint64_t seq) {
  return static_cast<uint32_t>(seq % (kAgreeBit - 1));
}

}  // namespace hc::session
