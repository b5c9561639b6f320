// The chunk field of a NetOp's tags (transport.h: comm and seq name the op, chunk the message).
//
//   bit 31       kind: 0 = data, 1 = failure notice.
//   bits 30..0   data: the message's index on its directed link (sender node -> receiver node),
//                counted from 0 in each op, modulo 2^31. A schedule visits its steps in order
//                and each step's chunks in order, so the index is the (step, chunk) pair laid out
//                step-major along the link: step s's chunk k follows every chunk of the link's
//                earlier steps. Both ends enumerate a link identically, so they agree on it.
//                notice: 0 (one notice at most per directed link per op).
//
// Below 2^31 messages on one link per op every data tag of an op is unique. Past that, indices
// repeat, and matching stays exact anyway: both ends post a link's messages in index order, and
// the transport matches sends and receives with the same peer and tag in the order each side
// posted them.
#pragma once

#include <cstdint>

#include "daemon/transport/transport.h"

namespace hc::coll::net {

constexpr uint32_t kNoticeBit = 0x80000000u;
constexpr uint32_t kLinkIndexMask = 0x7fffffffu;

constexpr transport::Tag dataTag(uint64_t comm, uint64_t seq, uint64_t linkIndex) {
  return transport::makeTag(comm, seq, static_cast<uint32_t>(linkIndex & kLinkIndexMask));
}

constexpr transport::Tag noticeTag(uint64_t comm, uint64_t seq) {
  return transport::makeTag(comm, seq, kNoticeBit);
}

}  // namespace hc::coll::net
