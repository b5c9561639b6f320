#include "daemon/control/membership_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <iterator>

namespace hc::control {
namespace {

constexpr char kJoinLabel[] = "hetero-comm/peer-join/v2";
constexpr char kTableLabel[] = "hetero-comm/peer-table/v2";

void appendU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i));
}

void appendU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
}

void appendBytes(std::string& out, std::string_view bytes) {
  appendU32(out, static_cast<uint32_t>(bytes.size()));
  out += bytes;
}

template <size_t N>
void appendFixed(std::string& out, const std::array<uint8_t, N>& bytes) {
  out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void appendNode(std::string& out, const peer::NodeIdentity& node,
                std::string_view transportAddress) {
  appendBytes(out, node.hostname);
  appendBytes(out, node.bootId);
  appendBytes(out, node.instance);
  appendBytes(out, transportAddress);
}

Proof hmacOf(const ClusterToken& token, const std::string& message) {
  return hmacSha256(token.secret(),
                    {reinterpret_cast<const uint8_t*>(message.data()), message.size()});
}

bool matches(const Proof& expected, std::span<const uint8_t> proof) {
  // The length is public (always kProofBytes); only the content is compared in constant time.
  if (proof.size() != expected.size()) return false;
  return CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

}  // namespace

Proof hmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> message) {
  Proof out{};
  unsigned int length = 0;
  // One-shot HMAC(): not deprecated in OpenSSL 3, unlike HMAC_CTX.
  const uint8_t* ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(),
                           message.size(), out.data(), &length);
  HC_CHECK(ok != nullptr && length == out.size());
  return out;
}

Result<Nonce> randomNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    return internalError("RAND_bytes failed to make a nonce");
  }
  return nonce;
}

std::string joinProofMessage(const Nonce& rootNonce, const Nonce& joinerNonce,
                             const peer::JoinRequest& join) {
  std::string m(kJoinLabel, sizeof(kJoinLabel));  // includes the terminating 0
  appendFixed(m, rootNonce);
  appendFixed(m, joinerNonce);
  appendFixed(m, join.key);
  appendU32(m, join.nranks);
  appendU32(m, static_cast<uint32_t>(join.timeout.count()));
  appendU32(m, static_cast<uint32_t>(join.ranks.size()));
  for (uint32_t rank : join.ranks) appendU32(m, rank);
  appendNode(m, join.node, join.transportAddress);
  appendU32(m, join.wireVersion);
  return m;
}

Proof computeJoinProof(const ClusterToken& token, const Nonce& rootNonce, const Nonce& joinerNonce,
                       const peer::JoinRequest& join) {
  return hmacOf(token, joinProofMessage(rootNonce, joinerNonce, join));
}

bool verifyJoinProof(const ClusterToken& token, const Nonce& rootNonce, const Nonce& joinerNonce,
                     const peer::JoinRequest& join, std::span<const uint8_t> proof) {
  return matches(computeJoinProof(token, rootNonce, joinerNonce, join), proof);
}

std::string tableProofMessage(const Nonce& joinerNonce, const peer::CommKey& key,
                              const peer::RankTable& table) {
  std::string m(kTableLabel, sizeof(kTableLabel));
  appendFixed(m, joinerNonce);
  appendFixed(m, key);
  appendU32(m, table.nranks);
  // The placements actually sent, however many: a receiver checks their count separately.
  appendU32(m, static_cast<uint32_t>(table.ranks.size()));
  for (const peer::RankPlacement& p : table.ranks) {
    appendU32(m, p.node);
    appendU32(m, p.localRank);
  }
  appendU32(m, static_cast<uint32_t>(table.nodes.size()));
  for (const peer::NodeEntry& node : table.nodes) {
    appendNode(m, node.identity, node.transportAddress);
    appendU32(m, static_cast<uint32_t>(node.ranks.size()));
    for (uint32_t rank : node.ranks) appendU32(m, rank);
  }
  appendU64(m, table.identity);
  return m;
}

Proof computeTableProof(const ClusterToken& token, const Nonce& joinerNonce,
                        const peer::CommKey& key, const peer::RankTable& table) {
  return hmacOf(token, tableProofMessage(joinerNonce, key, table));
}

bool verifyTableProof(const ClusterToken& token, const Nonce& joinerNonce, const peer::CommKey& key,
                      const peer::RankTable& table, std::span<const uint8_t> proof) {
  return matches(computeTableProof(token, joinerNonce, key, table), proof);
}

Proof computeProgressProof(const ClusterToken& token, const Nonce& nonce, uint64_t identity,
                           const std::string& key) {
  std::string m("hetero-comm/peer-progress/v2");
  m.push_back('\0');
  m.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  appendU64(m, identity);
  m.append(key);
  return hmacOf(token, m);
}

bool verifyProgressProof(const ClusterToken& token, const Nonce& nonce, uint64_t identity,
                         const std::string& key, std::span<const uint8_t> proof) {
  return matches(computeProgressProof(token, nonce, identity, key), proof);
}

NonceBook::NonceBook(std::chrono::milliseconds ttl, size_t capacity,
                     std::function<Clock::time_point()> now)
    : ttl_(ttl), capacity_(capacity), now_(std::move(now)) {
  // Without a secret of its own every nonce would be forgeable: no book then.
  Result<Nonce> secret = randomNonce();
  HC_CHECK(secret.isOk());
  secret_ = secret.value();
}

namespace {
constexpr size_t kRandomBytes = 16;
constexpr size_t kExpiryBytes = 8;
constexpr size_t kSignedBytes = kRandomBytes + kExpiryBytes;
static_assert(kSignedBytes + 8 == kNonceBytes);
}  // namespace

NonceBook::Mac NonceBook::macOf(std::span<const uint8_t> randomAndExpiry) const {
  const Proof full = hmacSha256(secret_, randomAndExpiry);
  Mac mac;
  std::copy_n(full.begin(), mac.size(), mac.begin());
  return mac;
}

std::optional<NonceBook::Clock::time_point> NonceBook::expiryOf(
    std::span<const uint8_t> nonce) const {
  if (nonce.size() != kNonceBytes) return std::nullopt;
  const Mac mac = macOf(nonce.first(kSignedBytes));
  if (CRYPTO_memcmp(mac.data(), nonce.data() + kSignedBytes, mac.size()) != 0) return std::nullopt;
  uint64_t ms = 0;
  for (size_t i = 0; i < kExpiryBytes; ++i) {
    ms |= uint64_t{nonce[kRandomBytes + i]} << (8 * i);
  }
  return Clock::time_point(std::chrono::milliseconds(ms));
}

void NonceBook::dropExpiredLocked(Clock::time_point now) {
  while (!byExpiry_.empty() && byExpiry_.front().second <= now) {
    spent_.erase(byExpiry_.front().first);
    byExpiry_.pop_front();
  }
}

Result<Nonce> NonceBook::issue() {
  Result<Nonce> fresh = randomNonce();
  if (!fresh.isOk()) return fresh;
  Nonce nonce = fresh.value();
  const auto expiry = std::chrono::duration_cast<std::chrono::milliseconds>(
                          (now_() + ttl_).time_since_epoch())
                          .count();
  for (size_t i = 0; i < kExpiryBytes; ++i) {
    nonce[kRandomBytes + i] = static_cast<uint8_t>(static_cast<uint64_t>(expiry) >> (8 * i));
  }
  const Mac mac = macOf(std::span(nonce).first(kSignedBytes));
  std::copy(mac.begin(), mac.end(), nonce.begin() + kSignedBytes);
  return nonce;
}

bool NonceBook::valid(std::span<const uint8_t> nonce) {
  const std::optional<Clock::time_point> expiry = expiryOf(nonce);
  if (!expiry) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = now_();
  dropExpiredLocked(now);
  return *expiry > now &&
         spent_.count(std::string(reinterpret_cast<const char*>(nonce.data()), nonce.size())) == 0;
}

Status NonceBook::spend(std::span<const uint8_t> nonce) {
  const std::optional<Clock::time_point> expiry = expiryOf(nonce);
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = now_();
  dropExpiredLocked(now);
  std::string key(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  if (!expiry || *expiry <= now || spent_.count(key) != 0) {
    return Status(Code::PermissionDenied, "its nonce is unknown, expired or already used");
  }
  if (spent_.size() >= capacity_) {
    return Status(Code::NoResource, "too many joins within a challenge's lifetime; retry shortly");
  }
  spent_.emplace(key, *expiry);
  // Expiries arrive out of order only by the clock's resolution: keep the deque sorted anyway.
  auto at = byExpiry_.end();
  while (at != byExpiry_.begin() && std::prev(at)->second > *expiry) --at;
  byExpiry_.emplace(at, std::move(key), *expiry);
  return okStatus();
}

}  // namespace hc::control
