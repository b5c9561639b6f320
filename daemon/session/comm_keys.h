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

// FNV-1a over `text` from `basis`: a stable digest (the same on every daemon and build).
inline uint64_t stableDigest(const std::string& text, uint64_t basis = 0xcbf29ce484222325ull) {
  uint64_t h = basis;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The key of the `generation`th shrink of `parentKey` (1, 2, ...): its survivors' daemons join
// the child at its root under this key. It names the child, it proves nothing: the root admits
// only daemons of the cluster (membership proofs), and the child draws its identity there as
// every spanning communicator does.
inline std::string shrinkKeyHex(const std::string& parentKey, uint32_t generation) {
  return parentKey + "/shrink." + std::to_string(generation);
}
inline peer::CommKey shrinkJoinKey(const std::string& shrinkKey) {
  const uint64_t halves[2] = {stableDigest(shrinkKey),
                              stableDigest(shrinkKey, 0x84222325cbf29ce4ull)};
  peer::CommKey k;
  std::memcpy(k.data(), halves, k.size());
  return k;
}

}  // namespace hc::session
