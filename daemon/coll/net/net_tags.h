// The 16 chunk bits of a NetOp's tags (transport.h gives comm and seq the other 48 bits).
//
//   bit 15       kind: 0 = data, 1 = failure notice.
//   bits 14..0   data: the message's index on its directed link (sender node -> receiver node),
//                counted from 0 in each op, modulo 2^15. A schedule visits its steps in order
//                and each step's chunks in order, so the index is the (step, chunk) pair laid out
//                step-major along the link: step s's chunk k follows every chunk of the link's
//                earlier steps. Both ends enumerate a link identically, so they agree on it.
//                notice: 0 (one notice at most per directed link per op).
//
// Below 2^15 messages on one link per op (16 GiB at 512 KiB chunks) every data tag of an op is
// unique. Past that, indices repeat, and matching stays exact anyway: both ends post a link's
// messages in index order, and the transport matches sends and receives with the same peer and
// tag in the order each side posted them.
#pragma once

#include <cstdint>

#include "daemon/transport/transport.h"

namespace hc::coll::net {

constexpr uint16_t kNoticeBit = 0x8000;
constexpr uint32_t kLinkIndexMask = 0x7fff;

constexpr uint64_t dataTag(uint16_t comm, uint32_t seq, uint64_t linkIndex) {
  return transport::makeTag(comm, seq, static_cast<uint16_t>(linkIndex & kLinkIndexMask));
}

constexpr uint64_t noticeTag(uint16_t comm, uint32_t seq) {
  return transport::makeTag(comm, seq, kNoticeBit);
}

}  // namespace hc::coll::net
