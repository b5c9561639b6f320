// The Peer service at the message level, driven through the raw gRPC stub the way a hostile or
// broken joiner could: replayed nonces, altered joins, malformed messages, abandoned calls.
#include <gmock/gmock.h>

#include <future>

#include "daemon/control/grpc_status.h"
#include "daemon/control/peer_convert.h"
#include "hetero_comm/v1/peer.grpc.pb.h"
#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

// Any identity outside the reserved ones (transport.h).
constexpr uint64_t kTestIdentity = 0x5eed0000c0de0001ull;

using ::testing::HasSubstr;
namespace v1 = hetero_comm::v1;

class PeerProtocolTest : public PeerFixture {
 protected:
  void SetUp() override {
    PeerFixture::SetUp();
    stub_ = v1::Peer::NewStub(grpc::CreateChannel(root_, grpc::InsecureChannelCredentials()));
    Result<ClusterToken> token = ClusterToken::load(tokenPath_);
    ASSERT_TRUE(token.isOk()) << token.status().toString();
    token_ = std::make_unique<ClusterToken>(std::move(token).value());
  }

  Nonce challenge() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::ChallengeResponse response;
    grpc::Status status = stub_->Challenge(&context, v1::ChallengeRequest(), &response);
    HC_CHECK(status.ok() && response.nonce().size() == kNonceBytes);
    EXPECT_GT(response.ttl_ms(), 0u);
    Nonce nonce{};
    std::copy(response.nonce().begin(), response.nonce().end(), nonce.begin());
    return nonce;
  }

  // A correctly signed Join message for `join` under a fresh nonce.
  v1::JoinRequest signedJoin(peer::JoinRequest join) {
    join.timeout = 20'000ms;
    const Nonce rootNonce = challenge();
    const Nonce joinerNonce = randomNonce().value();
    v1::JoinRequest message;
    toProto(join, rootNonce, joinerNonce, computeJoinProof(*token_, rootNonce, joinerNonce, join),
            &message);
    return message;
  }

  Status send(const v1::JoinRequest& message, std::chrono::milliseconds callDeadline = 10s,
              v1::JoinResponse* response = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + callDeadline);
    v1::JoinResponse ignored;
    return fromGrpcStatus(stub_->Join(&context, message, response ? response : &ignored), "Join");
  }

  std::unique_ptr<v1::Peer::Stub> stub_;
  std::unique_ptr<ClusterToken> token_;
};

TEST_F(PeerProtocolTest, ReplayedNonceIsRefused) {
  v1::JoinRequest message = signedJoin(makeJoin(keyOf(20), 1, {0}, "a"));
  v1::JoinResponse response;
  Status first = send(message, 10s, &response);
  ASSERT_TRUE(first.isOk()) << first.toString();
  EXPECT_EQ(response.table().nranks(), 1u);
  Result<peer::RankTable> table = fromProto(response.table());
  ASSERT_TRUE(table.isOk());
  EXPECT_TRUE(verifyTableProof(*token_, nonceOf(message.joiner_nonce(), "").value(), keyOf(20),
                               table.value(), bytesOf(response.table_proof())))
      << "the root signs its answer over the joiner's nonce";

  // The identical message again, e.g. captured on the wire: same nonce, valid proof. Without
  // the nonce check the root would answer "already formed" (InvalidArgument) instead.
  Status second = send(message);
  EXPECT_EQ(second.code(), Code::PermissionDenied) << second.toString();
  EXPECT_THAT(second.message(), HasSubstr("already used"));
}

// Nonces are stateless until a proof made with one verifies: a wrong proof spends nothing (a
// guess is hopeless anyway), so a stranger's Challenges and bad Joins cost the root no memory
// and cannot crowd out the join that holds the token.
TEST_F(PeerProtocolTest, AWrongProofSpendsNothingAndChallengesCostNothing) {
  for (int i = 0; i < 2000; ++i) (void)challenge();
  v1::JoinRequest message = signedJoin(makeJoin(keyOf(22), 1, {0}, "a"));
  v1::JoinRequest forged = message;
  forged.set_proof(std::string(kProofBytes, 'x'));
  for (int i = 0; i < 3; ++i) {
    Status refused = send(forged);
    EXPECT_EQ(refused.code(), Code::PermissionDenied) << refused.toString();
    EXPECT_THAT(refused.message(), HasSubstr("membership proof"));
  }
  Status joined = send(message);
  EXPECT_TRUE(joined.isOk()) << joined.toString();
  Status replayed = send(message);
  EXPECT_EQ(replayed.code(), Code::PermissionDenied) << replayed.toString();
}

TEST_F(PeerProtocolTest, ProofCoversEveryFieldTheRootUses) {
  auto expectRefused = [&](auto&& alter, const char* what) {
    v1::JoinRequest message = signedJoin(makeJoin(keyOf(21), 2, {0}, "a"));
    alter(message);
    Status s = send(message);
    EXPECT_EQ(s.code(), Code::PermissionDenied) << what << ": " << s.toString();
  };
  expectRefused([](v1::JoinRequest& m) { m.set_ranks(0, 1); }, "rank");
  expectRefused([](v1::JoinRequest& m) { m.set_nranks(3); }, "nranks");
  expectRefused([](v1::JoinRequest& m) { m.set_comm_key(std::string(16, 'k')); }, "key");
  expectRefused([](v1::JoinRequest& m) { m.set_transport_address("attacker"); }, "address");
  expectRefused([](v1::JoinRequest& m) { m.mutable_node()->set_hostname("x"); }, "hostname");
  expectRefused([](v1::JoinRequest& m) { m.set_timeout_ms(1); }, "timeout");
  expectRefused([](v1::JoinRequest& m) { (*m.mutable_joiner_nonce())[0] ^= 1; }, "joiner nonce");
  expectRefused([](v1::JoinRequest& m) { m.mutable_proof()->pop_back(); }, "short proof");
  EXPECT_TRUE(server_->registry().joinedRanks(keyOf(21)).empty());
}

TEST_F(PeerProtocolTest, JoinWithoutChallengeIsRefused) {
  v1::JoinRequest message = signedJoin(makeJoin(keyOf(22), 1, {0}, "a"));
  message.clear_nonce();
  Status s = send(message);
  EXPECT_EQ(s.code(), Code::PermissionDenied) << s.toString();
}

TEST_F(PeerProtocolTest, MalformedJoinsAreInvalidArguments) {
  auto expectInvalid = [&](peer::JoinRequest join, const char* fragment) {
    Status s = send(signedJoin(std::move(join)));
    EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
    EXPECT_THAT(s.message(), HasSubstr(fragment));
  };
  expectInvalid(makeJoin(keyOf(23), 2, {2}, "a"), "out of range");
  expectInvalid(makeJoin(keyOf(23), 2, {0, 0}, "a"), "appears twice");
  expectInvalid(makeJoin(keyOf(23), 0, {0}, "a"), "nranks 0");
  expectInvalid(makeJoin(keyOf(23), 2, {}, "a"), "no ranks");
  peer::JoinRequest noAddress = makeJoin(keyOf(23), 2, {0}, "a");
  noAddress.transportAddress.clear();
  expectInvalid(noAddress, "transport address");

  v1::JoinRequest noJoinerNonce = signedJoin(makeJoin(keyOf(23), 2, {0}, "a"));
  noJoinerNonce.clear_joiner_nonce();
  EXPECT_THAT(send(noJoinerNonce).message(), HasSubstr("joiner_nonce has 0 bytes"));

  v1::JoinRequest shortKey = signedJoin(makeJoin(keyOf(23), 2, {0}, "a"));
  shortKey.mutable_comm_key()->pop_back();
  Status s = send(shortKey);
  EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
  EXPECT_THAT(s.message(), HasSubstr("comm_key has 15 bytes"));
}

// A joiner that gives up (its call is cancelled) leaves the communicator, so its rank can join
// again rather than being refused as a duplicate.
TEST_F(PeerProtocolTest, AbandonedJoinIsWithdrawn) {
  peer::CommKey key = keyOf(24);
  v1::JoinRequest message = signedJoin(makeJoin(key, 2, {0}, "a"));
  std::thread abandoned([&] {
    Status s = send(message, 1000ms);  // gRPC deadline far below the join's own timeout
    EXPECT_EQ(s.code(), Code::Timeout) << s.toString();
  });
  awaitJoined(key, 1);
  awaitJoined(key, 0);  // cancelled at its gRPC deadline
  abandoned.join();

  Joiners joiners(root_, tokenPath_);
  joiners.start(makeJoin(key, 2, {0}, "a"), Clock::now() + 20s);
  joiners.start(makeJoin(key, 2, {1}, "b"), Clock::now() + 20s);
  joiners.joinAll();
  EXPECT_TRUE(joiners.result(0).isOk()) << joiners.result(0).status().toString();
  EXPECT_TRUE(joiners.result(1).isOk()) << joiners.result(1).status().toString();
}

// A node that joins again with the same ranks (its first reply was lost) replaces its first join.
TEST_F(PeerProtocolTest, RetriedJoinFromTheSameNodeReplacesTheFirst) {
  peer::CommKey key = keyOf(25);
  std::promise<Result<peer::RankTable>> firstResult;
  std::unique_ptr<PeerClient> firstClient = newClient();
  firstClient->joinAsync(root_, makeJoin(key, 2, {0}, "a"), Clock::now() + 20s,
                         [&](Result<peer::RankTable> r) { firstResult.set_value(std::move(r)); });
  awaitJoined(key, 1);

  Joiners joiners(root_, tokenPath_);
  size_t retry = joiners.start(makeJoin(key, 2, {0}, "a"), Clock::now() + 20s);
  Result<peer::RankTable> first = firstResult.get_future().get();  // settled when the retry lands
  ASSERT_FALSE(first.isOk());
  EXPECT_EQ(first.status().code(), Code::Unavailable);
  EXPECT_THAT(first.status().message(), HasSubstr("superseded"));

  size_t other = joiners.start(makeJoin(key, 2, {1}, "b"), Clock::now() + 20s);
  joiners.joinAll();
  EXPECT_TRUE(joiners.result(retry).isOk()) << joiners.result(retry).status().toString();
  EXPECT_TRUE(joiners.result(other).isOk()) << joiners.result(other).status().toString();
}

// Destroying a PeerClient cancels its joins under way: the caller hears of it, and the root
// withdraws the join.
TEST_F(PeerProtocolTest, DestroyingTheClientCancelsItsJoins) {
  peer::CommKey key = keyOf(28);
  std::promise<Result<peer::RankTable>> result;
  std::unique_ptr<PeerClient> client = newClient();
  client->joinAsync(root_, makeJoin(key, 2, {0}, "a"), Clock::now() + 20s,
                    [&](Result<peer::RankTable> r) { result.set_value(std::move(r)); });
  awaitJoined(key, 1);
  const auto began = Clock::now();
  client.reset();
  EXPECT_LT(Clock::now() - began, 2s);
  std::future<Result<peer::RankTable>> settled = result.get_future();
  ASSERT_EQ(settled.wait_for(0s), std::future_status::ready)
      << "settled before the destructor returned";
  Result<peer::RankTable> r = settled.get();
  EXPECT_EQ(r.status().code(), Code::Unavailable) << r.status().toString();
  awaitJoined(key, 0);
}

// Same node, other ranks: the joins merge into one node (a daemon joins once per local rank).
TEST_F(PeerProtocolTest, SecondJoinFromTheSameNodeWithOtherRanksIsMerged) {
  peer::CommKey key = keyOf(26);
  Joiners joiners(root_, tokenPath_);
  size_t first = joiners.start(makeJoin(key, 3, {0}, "a"), Clock::now() + 20s);
  awaitJoined(key, 1);
  size_t second = joiners.start(makeJoin(key, 3, {1}, "a"), Clock::now() + 20s);
  awaitJoined(key, 2);
  Result<peer::RankTable> last =
      newClient()->join(root_, makeJoin(key, 3, {2}, "b"), Clock::now() + 20s);
  joiners.joinAll();
  ASSERT_TRUE(last.isOk()) << last.status().toString();
  ASSERT_EQ(last->nodes.size(), 2u);
  EXPECT_EQ(last->nodes[0].ranks, (std::vector<uint32_t>{0, 1}));
  for (size_t i : {first, second}) {
    ASSERT_TRUE(joiners.result(i).isOk()) << joiners.result(i).status().toString();
    EXPECT_EQ(joiners.result(i).value(), last.value());
  }
}

// A root that is not what it claims: it answers with a well-formed table, signed in one of
// the ways below. Only the honest way may be accepted; an honest root of another wire version is
// refused too, naming both versions.
enum class RootSigning { Honest, OtherToken, OtherJoinerNonce, HonestOtherWireVersion };

class FakeRoot final : public v1::Peer::Service {
 public:
  explicit FakeRoot(RootSigning signing) : signing_(signing) {}

  grpc::Status Challenge(grpc::ServerContext*, const v1::ChallengeRequest*,
                         v1::ChallengeResponse* response) override {
    response->set_nonce(std::string(kNonceBytes, 'n'));
    response->set_ttl_ms(1000);
    return grpc::Status::OK;
  }

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override {
    peer::JoinRequest join = fromProto(*request).value();
    peer::RankTable table = peer::buildRankTable(join.nranks, {&join}, kTestIdentity);
    table.nodes[0].transportAddress = "attacker-controlled-address";
    toProto(table, response->mutable_table());
    Nonce joinerNonce = nonceOf(request->joiner_nonce(), "").value();
    if (signing_ == RootSigning::OtherJoinerNonce) joinerNonce[0] ^= 1;
    const std::string secret =
        signing_ == RootSigning::OtherToken ? "not-the-cluster-token!" : kToken;
    ClusterToken token = ClusterToken::fromBytes(bytesOf(secret)).value();
    Proof proof = computeTableProof(token, joinerNonce, join.key, table);
    response->set_table_proof(proof.data(), proof.size());
    response->set_wire_version(signing_ == RootSigning::HonestOtherWireVersion
                                   ? transport::kWireVersion + 1
                                   : transport::kWireVersion);
    return grpc::Status::OK;
  }

 private:
  const RootSigning signing_;
};

class PeerClientRootCheckTest : public PeerFixture,
                                public ::testing::WithParamInterface<RootSigning> {};

TEST_P(PeerClientRootCheckTest, OnlyATableSignedWithTheClusterTokenIsAccepted) {
  FakeRoot fake(GetParam());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  Result<peer::RankTable> table = newClient()->join("127.0.0.1:" + std::to_string(port),
                                              makeJoin(keyOf(27), 1, {0}, "a"), Clock::now() + 20s);
  if (GetParam() == RootSigning::Honest) {
    ASSERT_TRUE(table.isOk()) << table.status().toString();
    EXPECT_EQ(table->nodes[0].transportAddress, "attacker-controlled-address");
    EXPECT_EQ(table->identity, kTestIdentity);
  } else if (GetParam() == RootSigning::HonestOtherWireVersion) {
    ASSERT_FALSE(table.isOk());
    EXPECT_EQ(table.status().code(), Code::InvalidArgument);
    EXPECT_THAT(table.status().message(),
                HasSubstr("speaks wire version " + std::to_string(transport::kWireVersion + 1)));
    EXPECT_THAT(table.status().message(),
                HasSubstr("this daemon wire version " + std::to_string(transport::kWireVersion)));
  } else {
    ASSERT_FALSE(table.isOk());
    EXPECT_EQ(table.status().code(), Code::PermissionDenied);
    EXPECT_THAT(table.status().message(), HasSubstr("valid proof"));
  }
  server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Signings, PeerClientRootCheckTest,
                         ::testing::Values(RootSigning::Honest, RootSigning::OtherToken,
                                           RootSigning::OtherJoinerNonce,
                                           RootSigning::HonestOtherWireVersion));

}  // namespace
}  // namespace hc::control::testing
