// How much of a root's answer a joiner takes in (peer_client.h, maxJoinResponseBytes): the bound
// on its own, against the largest honest tables the real conversion makes, and end to end against
// a fake root, without the cluster token, that pads its answer.
#include <gmock/gmock.h>

#include <atomic>
#include <bit>
#include <future>
#include <set>
#include <vector>

#include "daemon/control/peer_convert.h"
#include "hetero_comm/v1/peer.grpc.pb.h"
#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

using ::testing::HasSubstr;
namespace v1 = hetero_comm::v1;

// Any identity outside the reserved ones (transport.h).
constexpr uint64_t kTestIdentity = 0x5eed0000c0de0002ull;

TEST(JoinReceiveLimitTest, GrowsWithNranksUpToTheCeiling) {
  size_t previous = 0;
  for (uint32_t nranks = 1; maxJoinResponseBytes(nranks) < kMaxRankTableBytes; ++nranks) {
    ASSERT_GT(maxJoinResponseBytes(nranks), previous) << "nranks " << nranks;
    previous = maxJoinResponseBytes(nranks);
  }
  EXPECT_GT(previous, size_t{200} << 20) << "the ceiling came too early";
}

TEST(JoinReceiveLimitTest, FloorAndCeilingHoldForEveryNranks) {
  std::set<size_t> limits;
  for (uint32_t nranks = 1; nranks <= peer::kMaxRanks; ++nranks) {
    const size_t bound = maxJoinResponseBytes(nranks);
    const size_t limit = joinReceiveLimit(nranks);
    ASSERT_GE(bound, kMinJoinResponseBytes) << "nranks " << nranks;
    ASSERT_LE(limit, kMaxRankTableBytes) << "nranks " << nranks;
    ASSERT_TRUE(std::has_single_bit(limit)) << "nranks " << nranks;
    ASSERT_GE(limit, bound);
    ASSERT_LT(limit, 2 * bound);
    limits.insert(limit);
  }
  EXPECT_EQ(maxJoinResponseBytes(peer::kMaxRanks), kMaxRankTableBytes);
  // One channel per limit and root: few.
  EXPECT_LE(limits.size(), 13u);
}

// The largest answer an honest root can give a join of nranks: every join (one rank each, on a
// node of its own) at the largest fields the root accepts, through the root's own code.
v1::JoinResponse largestHonestAnswer(uint32_t nranks, uint32_t ranksPerNode = 1) {
  std::vector<peer::JoinRequest> joins;
  for (uint32_t rank = 0; rank < nranks; ++rank) {
    const uint32_t node = rank / ranksPerNode;
    std::string tag = std::to_string(node) + "-";
    peer::JoinRequest join;
    join.key = keyOf(40);
    join.nranks = nranks;
    join.ranks = {rank};
    join.node = {tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'h'),
                 tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'b'),
                 tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'i')};
    join.transportAddress = std::string(peer::kMaxTransportAddressBytes, 'u');
    join.timeout = 1ms;
    HC_CHECK(peer::validateJoin(join).isOk());
    joins.push_back(std::move(join));
  }
  std::vector<const peer::JoinRequest*> pointers;
  for (const peer::JoinRequest& join : joins) pointers.push_back(&join);
  v1::JoinResponse answer;
  toProto(peer::buildRankTable(nranks, pointers, ~uint64_t{0}), answer.mutable_table());
  answer.set_table_proof(std::string(kProofBytes, '\xff'));
  answer.set_wire_version(UINT32_MAX);
  return answer;
}

// How far under the bound the largest honest answer may stay: a few bytes per rank (the zeros
// proto3 leaves out, indexes shorter than nranks).
size_t allowedSlack(uint32_t nranks) { return 8 * size_t{nranks} + 16; }

class HonestAnswerTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(HonestAnswerTest, LargestHonestAnswerFitsTheBound) {
  const uint32_t nranks = GetParam();
  const size_t bound = maxJoinResponseBytes(nranks);
  const size_t largest = largestHonestAnswer(nranks).ByteSizeLong();
  EXPECT_LE(largest, bound);
  EXPECT_LE(bound - largest, allowedSlack(nranks)) << "largest " << largest;
  // Fewer nodes, more ranks each, take less.
  EXPECT_LE(largestHonestAnswer(nranks, 4).ByteSizeLong(), largest);
  EXPECT_LE(largestHonestAnswer(nranks, nranks).ByteSizeLong(), largest);
}

TEST_P(HonestAnswerTest, OneMoreNodeOrALargerFieldIsOverTheBound) {
  const uint32_t nranks = GetParam();
  const size_t bound = maxJoinResponseBytes(nranks);
  {
    v1::JoinResponse answer = largestHonestAnswer(nranks);
    *answer.mutable_table()->add_nodes() = answer.table().nodes(0);
    EXPECT_GT(answer.ByteSizeLong(), bound);
  }
  {
    v1::JoinResponse answer = largestHonestAnswer(nranks);
    answer.mutable_table()->mutable_nodes(0)->mutable_identity()->mutable_hostname()->append(
        allowedSlack(nranks) + 1, 'h');
    EXPECT_GT(answer.ByteSizeLong(), bound);
  }
  {
    v1::JoinResponse answer = largestHonestAnswer(nranks);
    answer.mutable_table()->mutable_nodes(0)->mutable_transport_address()->append(
        allowedSlack(nranks) + 1, 'u');
    EXPECT_GT(answer.ByteSizeLong(), bound);
  }
}

INSTANTIATE_TEST_SUITE_P(Nranks, HonestAnswerTest, ::testing::Values(1, 2, 3, 16, 127, 128, 300));

// A Peer.Join answer of a table of 2 ranks whose node's transport address is `padding` bytes
// long, and a wrong proof: the bytes before the address and those after it, encoded by hand so that
// the address itself need never be in memory.
struct PaddedAnswer {
  std::string before;
  std::string after;
};

void appendVarint(uint64_t value, std::string* out) {
  for (; value >= 0x80; value >>= 7) out->push_back(static_cast<char>(value | 0x80));
  out->push_back(static_cast<char>(value));
}

PaddedAnswer paddedAnswer(size_t padding) {
  peer::JoinRequest join = makeJoin(keyOf(41), 2, {0, 1}, "padded");
  v1::RankTable table;
  toProto(peer::buildRankTable(2, {&join}, kTestIdentity), &table);
  v1::NodeEntry node = table.nodes(0);
  node.clear_transport_address();
  table.clear_nodes();
  const std::string tableBytes = table.SerializeAsString();
  const std::string nodeBytes = node.SerializeAsString();
  std::string address;  // NodeEntry.transport_address (2), up to its bytes
  address.push_back(0x12);
  appendVarint(padding, &address);
  const size_t nodeSize = nodeBytes.size() + address.size() + padding;
  std::string nodeField;  // RankTable.nodes (3), up to its bytes
  nodeField.push_back(0x1a);
  appendVarint(nodeSize, &nodeField);
  PaddedAnswer answer;
  answer.before.push_back(0x0a);  // JoinResponse.table (1)
  appendVarint(tableBytes.size() + nodeField.size() + nodeSize, &answer.before);
  answer.before += tableBytes + nodeField + nodeBytes + address;
  v1::JoinResponse rest;
  rest.set_table_proof(std::string(kProofBytes, '\0'));
  rest.set_wire_version(transport::kWireVersion);
  answer.after = rest.SerializeAsString();
  return answer;
}

TEST(PaddedAnswerTest, IsAWellFormedTableWithAWrongProof) {
  const PaddedAnswer answer = paddedAnswer(1000);
  v1::JoinResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(answer.before + std::string(1000, 'x') + answer.after));
  Result<peer::RankTable> table = fromProto(parsed.table());
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  EXPECT_EQ(table->nranks, 2u);
  ASSERT_EQ(table->nodes.size(), 1u);
  EXPECT_EQ(table->nodes[0].transportAddress, std::string(1000, 'x'));
  EXPECT_EQ(parsed.table_proof(), std::string(kProofBytes, '\0'));
}

// A root without the cluster token, serving Peer by hand: Challenge gets a nonce (padded as asked),
// Join a padded answer. The padding goes out from one chunk of memory that gRPC only borrows, so
// that what this process gains while a join runs is the joiner's.
class PaddingRoot final : public grpc::CallbackGenericService {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  PaddingRoot(size_t challengePadding, size_t tableChunks)
      : chunk_(kChunkBytes, 'x'), tableChunks_(tableChunks) {
    v1::ChallengeResponse challenge;
    challenge.set_nonce(std::string(kNonceBytes + challengePadding, 'n'));
    challenge.set_ttl_ms(1000);
    challenge_ = challenge.SerializeAsString();
    join_ = paddedAnswer(tableChunks * kChunkBytes);
  }

  size_t joinBytes() const {
    return join_.before.size() + tableChunks_ * kChunkBytes + join_.after.size();
  }
  int joinsAnswered() const { return joinsAnswered_.load(); }

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    std::vector<grpc::Slice> slices;
    if (context->method() == "/hetero_comm.v1.Peer/Join") {
      ++joinsAnswered_;
      slices.emplace_back(join_.before);
      for (size_t i = 0; i < tableChunks_; ++i) {
        slices.emplace_back(chunk_.data(), chunk_.size(), grpc::Slice::STATIC_SLICE);
      }
      slices.emplace_back(join_.after);
    } else {
      slices.emplace_back(challenge_);
    }
    return new Answer(grpc::ByteBuffer(slices.data(), slices.size()));
  }

 private:
  // Reads the request, answers, finishes.
  class Answer final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Answer(grpc::ByteBuffer answer) : answer_(std::move(answer)) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer request_;
    grpc::ByteBuffer answer_;
  };

  const std::string chunk_;  // outlives the server (PeerClientLimitTest)
  const size_t tableChunks_;
  std::string challenge_;
  PaddedAnswer join_;
  std::atomic<int> joinsAnswered_{0};
};

class PeerClientLimitTest : public PeerFixture {
 protected:
  // Starts the padding root; its address.
  std::string startPaddingRoot(size_t challengePadding, size_t tableChunks) {
    fake_ = std::make_unique<PaddingRoot>(challengePadding, tableChunks);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(fake_.get());
    fakeServer_ = builder.BuildAndStart();
    HC_CHECK(fakeServer_ != nullptr);
    return "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (fakeServer_) fakeServer_->Shutdown();
  }

  std::unique_ptr<PaddingRoot> fake_;
  std::unique_ptr<grpc::Server> fakeServer_;  // after fake_: goes first
};

// gRPC reads a whole message before it checks the receive limit: only the channel's memory quota
// keeps a padded answer from being read in full. Measured growth for this 128 MiB answer: about
// 10 MiB; 132 MiB with the receive limit alone; 580 MiB, parsed, with neither.
TEST_F(PeerClientLimitTest, PaddedAnswerIsRefusedUnparsedAndCostsTheJoinerLittle) {
  const std::string fake = startPaddingRoot(0, 128);
  std::unique_ptr<PeerClient> client = newClient();
  if (!clearPeakRss()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  const size_t before = rssField("VmRSS");
  const auto began = Clock::now();
  Result<peer::RankTable> r =
      client->join(fake, makeJoin(keyOf(42), 2, {0}, "a"), Clock::now() + 20s);
  const auto took = Clock::now() - began;
  const size_t growth = rssField("VmHWM") - before;
  RecordProperty("rss_growth_kib", std::to_string(growth >> 10));

  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::RemoteError) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("Peer.Join at " + fake));
  EXPECT_THAT(r.status().message(),
              HasSubstr("over " + std::to_string(joinReceiveLimit(2)) + " bytes"));
  EXPECT_THAT(r.status().message(), HasSubstr("a rank table of 2 ranks"));
  EXPECT_THAT(r.status().message(), HasSubstr("refused before parsing"));
  EXPECT_EQ(fake_->joinsAnswered(), 1) << "refused for size, yet asked again as for capacity";
  EXPECT_LT(took, 5s);
  EXPECT_LT(growth, size_t{32} << 20) << "the joiner grew by " << (growth >> 10) << " KiB for a "
                                      << (fake_->joinBytes() >> 10) << " KiB answer";
}

// The same kind of answer, within what a table of 200 ranks can be: read, and its proof refused.
TEST_F(PeerClientLimitTest, AnswerWithinTheLimitOfALargerJoinIsReadAndItsProofChecked) {
  const std::string fake = startPaddingRoot(0, 8);
  ASSERT_GT(joinReceiveLimit(200), fake_->joinBytes());
  Result<peer::RankTable> r =
      newClient()->join(fake, makeJoin(keyOf(43), 200, {0}, "a"), Clock::now() + 20s);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::PermissionDenied) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("valid proof"));
}

TEST_F(PeerClientLimitTest, PaddedChallengeIsRefusedUnparsed) {
  const std::string fake = startPaddingRoot(size_t{1} << 20, 0);
  Result<peer::RankTable> r =
      newClient()->join(fake, makeJoin(keyOf(44), 1, {0}, "a"), Clock::now() + 20s);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::RemoteError) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("Peer.Challenge at " + fake));
  EXPECT_THAT(r.status().message(), HasSubstr("a rank table of 1 ranks"));
  EXPECT_EQ(fake_->joinsAnswered(), 0);
}

// The quota of a channel follows the joins under way on it: every rank of a communicator joining
// through one daemon, each on a node of its own with the largest fields, gets the table, whose
// answers arrive at once, each close to the limit.
TEST_F(PeerClientLimitTest, LargestHonestTableReachesEveryJoinOfOneDaemonAtOnce) {
  uint32_t nranks = 1;
  while (joinReceiveLimit(nranks + 1) <= (size_t{2} << 20)) ++nranks;
  ASSERT_GT(maxJoinResponseBytes(nranks), joinReceiveLimit(nranks) * 9 / 10);
  const peer::CommKey key = keyOf(45);
  std::unique_ptr<PeerClient> client = newClient();
  std::vector<std::promise<Result<peer::RankTable>>> results(nranks);
  for (uint32_t rank = 0; rank < nranks; ++rank) {
    const std::string tag = std::to_string(rank) + "-";
    peer::JoinRequest join = makeJoin(key, nranks, {rank}, tag);
    join.node = {tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'h'),
                 tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'b'),
                 tag + std::string(peer::kMaxIdentityFieldBytes - tag.size(), 'i')};
    join.transportAddress = std::string(peer::kMaxTransportAddressBytes, 'u');
    (void)client->joinAsync(root_, join, Clock::now() + 60s, [&results, rank](auto result) {
      results[rank].set_value(std::move(result));
    });
  }
  for (uint32_t rank = 0; rank < nranks; ++rank) {
    Result<peer::RankTable> table = results[rank].get_future().get();
    ASSERT_TRUE(table.isOk()) << "rank " << rank << ": " << table.status().toString();
    EXPECT_EQ(table->nodes.size(), nranks);
  }
}

}  // namespace
}  // namespace hc::control::testing
