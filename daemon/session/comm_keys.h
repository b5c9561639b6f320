// The keys a communicator is known by on every daemon of it: in logs, as the key of pending
// joins, and as the key of its flight record on the status board.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "daemon/peer/peer_types.h"

namespace hc::session {

// "0011…ff": the key of a communicator formed by CommInit, from the client's unique id.
inline std::string commKeyHex(const uint8_t (&key)[16]) {
  peer::CommKey k;
  std::memcpy(k.data(), key, k.size());
  return peer::commKeyHex(k);
}

// The key a communicator split from `parentKey` is known by on every daemon of it: the
// parent's, the split's sequence number and the color, "<parent>/<seq>.<color>".
inline std::string splitKeyHex(const std::string& parentKey, uint64_t seq, int color) {
  return parentKey + "/" + std::to_string(seq) + "." + std::to_string(color);
}

}  // namespace hc::session
