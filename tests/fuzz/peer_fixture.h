// What the peer target and its seeds share: the cluster token, the joiner's nonce and key, the
// message kinds the first input byte selects (peer_fuzz.cc). The seeds carry proofs made with
// this token, so they pass every check the daemons make, the proofs included.
#pragma once

#include <cstdint>
#include <string_view>

#include "daemon/control/cluster_token.h"
#include "daemon/control/membership_proof.h"

namespace hc::fuzz {

// Byte 0 of a peer input, modulo kPeerKinds; the rest is the serialized protobuf message.
enum class PeerKind : uint8_t {
  JoinRequest = 0,         // at the root: Peer.Join's request
  JoinResponse = 1,        // at a joiner: the root's answer, the rank table
  ChallengeResponse = 2,   // at a joiner: the root's nonce
  CommProgressRequest = 3  // at a daemon asked for a communicator's progress
};
constexpr uint8_t kPeerKinds = 4;

inline const control::ClusterToken& fuzzToken() {
  static const auto* token = [] {
    constexpr std::string_view kSecret = "hetero-comm fuzz cluster token";
    auto t = control::ClusterToken::fromBytes(
        {reinterpret_cast<const uint8_t*>(kSecret.data()), kSecret.size()});
    return new control::ClusterToken(std::move(t.value()));
  }();
  return *token;
}

// The nonce a joiner sent with its Join: the root's table proof must cover it.
inline control::Nonce fuzzJoinerNonce() {
  control::Nonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0x40 + i);
  return n;
}

// The communicator key of the joiner's request, which the table proof covers too.
inline peer::CommKey fuzzCommKey() {
  peer::CommKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0xa0 + i);
  return k;
}

}  // namespace hc::fuzz
