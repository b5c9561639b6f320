// Membership proofs, both ways, without sending the cluster token. A joiner proves it holds the
// token to the root, and the root proves it to the joiner in its answer:
//   join proof  = HMAC-SHA256(token, joinProofMessage(rootNonce, joinerNonce, join))
//   table proof = HMAC-SHA256(token, tableProofMessage(joinerNonce, key, table))
// rootNonce comes from the root's Challenge (single use, short-lived), so a join proof is good
// for one join, once; joinerNonce is the joiner's own, fresh per join, so a table proof answers
// that join only. Each message binds every field its receiver acts on:
//   join:  "hetero-comm/peer-join/v2" 0x00 | rootNonce (32) | joinerNonce (32) | key (16)
//          | u32 nranks | u32 timeout_ms | u32 count | count x u32 rank
//          | hostname, boot id, instance, transport address (each u32 length | bytes)
//          | u32 wire version
//   table: "hetero-comm/peer-table/v2" 0x00 | joinerNonce (32) | key (16) | u32 nranks
//          | nranks x (u32 node | u32 local rank) | u32 node count | per node: hostname, boot id,
//          instance, transport address (each u32 length | bytes), u32 count | count x u32 rank
//          | u64 communicator identity
// Integers are little-endian. SHA-256 and HMAC come from OpenSSL's libcrypto, which gRPC links.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "daemon/control/cluster_token.h"
#include "daemon/peer/peer_types.h"

namespace hc::control {

constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

Proof hmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> message);
// 32 bytes from OpenSSL's CSPRNG.
[[nodiscard]] Result<Nonce> randomNonce();

std::string joinProofMessage(const Nonce& rootNonce, const Nonce& joinerNonce,
                             const peer::JoinRequest& join);
Proof computeJoinProof(const ClusterToken& token, const Nonce& rootNonce, const Nonce& joinerNonce,
                       const peer::JoinRequest& join);
// Constant-time in the proof's content: a mismatch reveals nothing about where it differs.
bool verifyJoinProof(const ClusterToken& token, const Nonce& rootNonce, const Nonce& joinerNonce,
                     const peer::JoinRequest& join, std::span<const uint8_t> proof);

std::string tableProofMessage(const Nonce& joinerNonce, const peer::CommKey& key,
                              const peer::RankTable& table);
Proof computeTableProof(const ClusterToken& token, const Nonce& joinerNonce,
                        const peer::CommKey& key, const peer::RankTable& table);
bool verifyTableProof(const ClusterToken& token, const Nonce& joinerNonce, const peer::CommKey& key,
                      const peer::RankTable& table, std::span<const uint8_t> proof);

// Peer.GetCommProgress: "hetero-comm/peer-progress/v2" 0x00 | nonce (32) | u64 identity
// | comm key string.
Proof computeProgressProof(const ClusterToken& token, const Nonce& nonce, uint64_t identity,
                           const std::string& key);
bool verifyProgressProof(const ClusterToken& token, const Nonce& nonce, uint64_t identity,
                         const std::string& key, std::span<const uint8_t> proof);

// The root's nonces, stateless until spent. A nonce is 16 random bytes, its expiry (u64 ms on
// the book's clock) and 8 bytes of HMAC-SHA256(secret, both), under a secret drawn when the book
// is made: issuing one stores nothing, so an unauthenticated Challenge flood costs the root no
// memory and cannot crowd out honest joins. A nonce is spent only once a proof made with it
// verified (the spent set holds the nonces of token holders, until they expire), so each proof
// is good for one join; wrong proofs spend nothing, and a guesser gains nothing from reusing a
// nonce while HMAC-SHA256 stands. Thread-safe.
class NonceBook {
 public:
  using Clock = std::chrono::steady_clock;
  // `capacity`: the most nonces spent and not yet expired (verified joins within a ttl); `now`
  // is injectable for tests.
  NonceBook(std::chrono::milliseconds ttl, size_t capacity,
            std::function<Clock::time_point()> now = Clock::now);

  // A fresh nonce; fails only when the system's random source does.
  [[nodiscard]] Result<Nonce> issue();
  // Whether this book issued the nonce, it has not expired and it was not spent. Changes nothing.
  bool valid(std::span<const uint8_t> nonce);
  // Spends a valid nonce, after the proof made with it verified: PermissionDenied when it is not
  // valid (expired, or spent by a replay meanwhile), NoResource when `capacity` spent nonces are
  // still live (the caller retries after a moment).
  [[nodiscard]] Status spend(std::span<const uint8_t> nonce);

  std::chrono::milliseconds ttl() const { return ttl_; }

 private:
  using Mac = std::array<uint8_t, 8>;
  Mac macOf(std::span<const uint8_t> randomAndExpiry) const;
  // The nonce's expiry when its MAC holds, else nullopt.
  std::optional<Clock::time_point> expiryOf(std::span<const uint8_t> nonce) const;
  void dropExpiredLocked(Clock::time_point now);

  const std::chrono::milliseconds ttl_;
  const size_t capacity_;
  const std::function<Clock::time_point()> now_;
  Nonce secret_{};
  std::mutex mutex_;
  std::unordered_map<std::string, Clock::time_point> spent_;        // nonce bytes -> expiry
  std::deque<std::pair<std::string, Clock::time_point>> byExpiry_;  // spent, by expiry
};

}  // namespace hc::control
