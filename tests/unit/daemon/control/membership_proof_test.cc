// HMAC-SHA256 against RFC 4231, the proof message's coverage, and the nonce book's single use,
// expiry and bound.
#include "daemon/control/membership_proof.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

// Any identity outside the reserved ones (transport.h).
constexpr uint64_t kTestIdentity = 0x5eed0000c0de0001ull;

std::string hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 0xf];
  }
  return s;
}

std::span<const uint8_t> bytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(MembershipProofTest, HmacSha256MatchesRfc4231) {
  // Test case 1: key 0x0b x 20, "Hi There".
  const std::string key1(20, '\x0b');
  EXPECT_EQ(hex(hmacSha256(bytesOf(key1), bytesOf("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: key "Jefe".
  EXPECT_EQ(hex(hmacSha256(bytesOf("Jefe"), bytesOf("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

ClusterToken tokenOf(std::string_view secret) {
  Result<ClusterToken> token = ClusterToken::fromBytes(bytesOf(secret));
  HC_CHECK(token.isOk());
  return std::move(token).value();
}

Nonce nonceOf(uint8_t first) {
  Nonce nonce{};
  nonce[0] = first;
  return nonce;
}

TEST(MembershipProofTest, JoinProofVerifiesOnlyForTheSameTokenNoncesAndJoin) {
  ClusterToken token = tokenOf(kToken);
  ClusterToken other = tokenOf("another-token-of-the-right-size");
  const Nonce root = nonceOf(1);
  const Nonce joiner = nonceOf(2);
  peer::JoinRequest join = makeJoin(keyOf(1), 4, {1, 2}, "a");
  Proof proof = computeJoinProof(token, root, joiner, join);
  EXPECT_TRUE(verifyJoinProof(token, root, joiner, join, proof));
  EXPECT_FALSE(verifyJoinProof(other, root, joiner, join, proof));
  EXPECT_FALSE(verifyJoinProof(token, nonceOf(3), joiner, join, proof));
  EXPECT_FALSE(verifyJoinProof(token, root, nonceOf(3), join, proof));
  // Same ranks in another local order is another join.
  peer::JoinRequest reordered = join;
  reordered.ranks = {2, 1};
  EXPECT_FALSE(verifyJoinProof(token, root, joiner, reordered, proof));
  // Field boundaries are length-prefixed: moving bytes between fields changes the message.
  peer::JoinRequest shifted = join;
  shifted.node.hostname += shifted.node.bootId.substr(0, 1);
  shifted.node.bootId.erase(0, 1);
  EXPECT_NE(joinProofMessage(root, joiner, join), joinProofMessage(root, joiner, shifted));
  peer::JoinRequest otherVersion = join;
  otherVersion.wireVersion = join.wireVersion + 1;
  EXPECT_FALSE(verifyJoinProof(token, root, joiner, otherVersion, proof));
  EXPECT_FALSE(verifyJoinProof(token, root, joiner, join, std::span(proof).first(31)));
}

TEST(MembershipProofTest, TableProofVerifiesOnlyForTheSameTokenNonceKeyAndTable) {
  ClusterToken token = tokenOf(kToken);
  ClusterToken other = tokenOf("another-token-of-the-right-size");
  const Nonce joiner = nonceOf(7);
  peer::JoinRequest a = makeJoin(keyOf(1), 3, {0, 2}, "a");
  peer::JoinRequest b = makeJoin(keyOf(1), 3, {1}, "b");
  peer::RankTable table = peer::buildRankTable(3, {&a, &b}, kTestIdentity);
  Proof proof = computeTableProof(token, joiner, keyOf(1), table);
  EXPECT_TRUE(verifyTableProof(token, joiner, keyOf(1), table, proof));
  EXPECT_FALSE(verifyTableProof(other, joiner, keyOf(1), table, proof));
  EXPECT_FALSE(verifyTableProof(token, nonceOf(8), keyOf(1), table, proof)) << "replayed answer";
  EXPECT_FALSE(verifyTableProof(token, joiner, keyOf(2), table, proof));
  peer::RankTable redirected = table;
  redirected.nodes[1].transportAddress = "attacker";
  EXPECT_FALSE(verifyTableProof(token, joiner, keyOf(1), redirected, proof));
  peer::RankTable moved = table;
  moved.ranks[2].localRank = 0;
  EXPECT_FALSE(verifyTableProof(token, joiner, keyOf(1), moved, proof));
  peer::RankTable renamed = table;  // another communicator's identity: its messages would be ours
  renamed.identity ^= 1ull << 40;
  EXPECT_FALSE(verifyTableProof(token, joiner, keyOf(1), renamed, proof));
}

TEST(NonceBookTest, ANonceIsSpentOnceAndOnlyThisBooksNoncesAreValid) {
  NonceBook book(10s, 16);
  Result<Nonce> nonce = book.issue();
  ASSERT_TRUE(nonce.isOk());
  EXPECT_TRUE(book.valid(nonce.value()));
  EXPECT_TRUE(book.valid(nonce.value())) << "checking spends nothing (a wrong proof costs none)";
  EXPECT_TRUE(book.spend(nonce.value()).isOk());
  EXPECT_FALSE(book.valid(nonce.value()));
  EXPECT_EQ(book.spend(nonce.value()).code(), Code::PermissionDenied) << "a replay";
  Nonce never{};
  EXPECT_FALSE(book.valid(never));
  EXPECT_EQ(book.spend(never).code(), Code::PermissionDenied);
  EXPECT_FALSE(book.valid(std::span(nonce.value()).first(16)));
  Nonce flipped = book.issue().value();
  flipped[20] ^= 1;  // a later expiry, forged
  EXPECT_FALSE(book.valid(flipped));
  NonceBook other(10s, 16);
  EXPECT_FALSE(other.valid(book.issue().value())) << "another book's secret";
}

TEST(NonceBookTest, NoncesAreDistinct) {
  NonceBook book(10s, 1000);
  std::set<Nonce> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(book.issue().value());
  EXPECT_EQ(seen.size(), 1000u);
}

// Challenge is unauthenticated: a flood of them must cost the root nothing and leave honest
// joins working. Only spent nonces (verified proofs) take room, until they expire.
TEST(NonceBookTest, AChallengeFloodCostsNothingAndSpentNoncesLeaveWhenExpired) {
  NonceBook::Clock::time_point now{};
  NonceBook book(100ms, 2, [&] { return now; });
  for (int i = 0; i < 100'000; ++i) ASSERT_TRUE(book.issue().isOk());
  Nonce a = book.issue().value();
  Nonce b = book.issue().value();
  Nonce c = book.issue().value();
  EXPECT_TRUE(book.spend(a).isOk());
  EXPECT_TRUE(book.spend(b).isOk());
  EXPECT_EQ(book.spend(c).code(), Code::NoResource) << "two verified joins within a lifetime";
  EXPECT_TRUE(book.valid(c)) << "refused for room, still good for a retry";
  now += 99ms;
  EXPECT_TRUE(book.valid(c));
  now += 1ms;
  EXPECT_FALSE(book.valid(c)) << "expired";
  EXPECT_EQ(book.spend(c).code(), Code::PermissionDenied);
  Nonce d = book.issue().value();
  EXPECT_TRUE(book.spend(d).isOk()) << "expired spent nonces leave the book";
}

}  // namespace
}  // namespace hc::control::testing
