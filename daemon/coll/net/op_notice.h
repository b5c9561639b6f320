// What an op's failure notice carries (schedule_runner.h): the Status code and words of the
// failure, and the node where it began. A node that fails because a notice reached it passes
// that notice on unchanged, so every node of a ring names the node that failed and its words,
// not the neighbour that told it. Fixed size: both ends of a transfer agree on its length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace hc::coll::net {

constexpr size_t kOpNoticeTextBytes = 504;

struct OpNotice {
  int32_t code = 0;                    // a hc Code; 0 until a notice arrived
  int32_t origin = -1;                 // the node where the failure began
  char text[kOpNoticeTextBytes] = {};  // NUL-terminated unless the sender lied
};
static_assert(sizeof(OpNotice) == 512);

// The notice a node sends when the op failed here: `why`'s code and words (cut to fit).
OpNotice makeOpNotice(int origin, const Status& why);

// The Status a notice that came from node `from` turns into here; `nodes` bounds the origin.
// Everything in it came from the network: an unknown code, an origin outside the op's nodes or
// an unterminated text is reported as what it is, never trusted. A party that went away stays
// Unavailable, so every survivor of a dead node reports the same code; anything else is that
// node's own failure, a RemoteError here.
Status fromOpNotice(const OpNotice& notice, int from, size_t nodes);

}  // namespace hc::coll::net
