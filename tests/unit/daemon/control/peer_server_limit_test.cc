// How much a stranger's Peer request can cost a root (peer_server.h, kMaxJoinRequestBytes and the
// listener's memory quota): the largest honest JoinRequest against the limit, and strangers,
// without the cluster token, that send padded joins over raw gRPC while an honest job forms.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>

#include <future>
#include <vector>

#include "daemon/control/peer_convert.h"
#include "hetero_comm/v1/peer.grpc.pb.h"
#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

namespace v1 = hetero_comm::v1;

void appendVarint(uint64_t value, std::string* out) {
  for (; value >= 0x80; value >>= 7) out->push_back(static_cast<char>(value | 0x80));
  out->push_back(static_cast<char>(value));
}

// The largest JoinRequest an honest joiner sends: every rank of the largest communicator brought
// by one node, the longest identity fields and transport address, every other field set.
v1::JoinRequest largestHonestJoin() {
  peer::JoinRequest join = makeJoin(keyOf(7), peer::kMaxRanks, {}, "big");
  join.ranks.resize(peer::kMaxRanks);
  for (uint32_t r = 0; r < peer::kMaxRanks; ++r) join.ranks[r] = r;
  join.node = {std::string(peer::kMaxIdentityFieldBytes, 'h'),
               std::string(peer::kMaxIdentityFieldBytes, 'b'),
               std::string(peer::kMaxIdentityFieldBytes, 'i')};
  join.transportAddress.assign(peer::kMaxTransportAddressBytes, 'a');
  join.timeout = std::chrono::milliseconds(UINT32_MAX);
  join.wireVersion = UINT32_MAX;
  Nonce nonce;
  nonce.fill(0xff);
  Proof proof;
  proof.fill(0xff);
  v1::JoinRequest message;
  toProto(join, nonce, nonce, proof, &message);
  return message;
}

TEST(JoinRequestLimitTest, LargestHonestJoinFitsTheLimit) {
  const size_t bytes = largestHonestJoin().ByteSizeLong();
  RecordProperty("largest_honest_join_bytes", std::to_string(bytes));
  EXPECT_LE(bytes, kMaxJoinRequestBytes);
}

// A Peer.Join request whose transport address is `chunks` MiB of padding, sent from one chunk of
// memory that gRPC only borrows, so that what this process gains while it is read is the root's.
class PaddedJoin {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  explicit PaddedJoin(size_t chunks) : chunk_(kChunkBytes, 'x'), chunks_(chunks) {
    v1::JoinRequest head;
    toProto(makeJoin(keyOf(9), 2, {1}, "stranger"), Nonce{}, Nonce{}, Proof{}, &head);
    head.clear_transport_address();
    head_ = head.SerializeAsString();
    head_.push_back(0x2a);  // JoinRequest.transport_address (5)
    appendVarint(chunks * kChunkBytes, &head_);
  }

  size_t bytes() const { return head_.size() + chunks_ * kChunkBytes; }

  grpc::ByteBuffer buffer() const {
    std::vector<grpc::Slice> slices;
    slices.emplace_back(head_);
    for (size_t i = 0; i < chunks_; ++i) {
      slices.emplace_back(chunk_.data(), chunk_.size(), grpc::Slice::STATIC_SLICE);
    }
    return grpc::ByteBuffer(slices.data(), slices.size());
  }

 private:
  const std::string chunk_;
  const size_t chunks_;
  std::string head_;
};

// Sends `join` as Peer.Join on a channel of its own, as a stranger without the token would; the
// root's answer.
grpc::Status sendRaw(const std::string& root, const PaddedJoin& join) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(root, grpc::InsecureChannelCredentials(), arguments));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  const grpc::ByteBuffer request = join.buffer();
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/hetero_comm.v1.Peer/Join", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

class PeerServerLimitTest : public PeerFixture {};

// gRPC reads a whole message before it checks the receive limit: only the listener's memory quota
// keeps strangers' padded joins from being read in full. Each is refused, the root grows by a
// small part of what they sent, and an honest communicator forms at the same root afterwards.
TEST_F(PeerServerLimitTest, StrangersPaddedJoinsAreRefusedAndCostTheRootLittle) {
  constexpr int kStrangers = 8;
  const PaddedJoin padded(128);
  if (!clearPeakRss()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  const size_t before = rssField("VmRSS");
  std::vector<std::future<grpc::Status>> strangers;
  for (int i = 0; i < kStrangers; ++i) {
    strangers.push_back(std::async(std::launch::async, [&] { return sendRaw(root_, padded); }));
  }
  for (auto& stranger : strangers) {
    const grpc::Status status = stranger.get();
    // Refused either way: the reset reaches a stranger still writing as a broken pipe.
    EXPECT_TRUE(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                status.error_code() == grpc::StatusCode::UNAVAILABLE)
        << status.error_code() << ": " << status.error_message();
  }
  const size_t growth = rssField("VmHWM") - before;
  RecordProperty("rss_growth_kib", std::to_string(growth >> 10));
  // Measured: about 2x the quota (59-79 MiB); 253 MiB for 4 such joins of 64 MiB without it.
  EXPECT_LT(growth, 3 * kPeerListenerMemoryBytes)
      << "the root grew by " << (growth >> 10) << " KiB for " << kStrangers << " joins of "
      << (padded.bytes() >> 10) << " KiB";

  Joiners joiners(root_, tokenPath_);
  const auto deadline = Clock::now() + 20s;
  joiners.start(makeJoin(keyOf(10), 2, {0}, "a"), deadline);
  joiners.start(makeJoin(keyOf(10), 2, {1}, "b"), deadline);
  joiners.joinAll();
  for (size_t i = 0; i < 2; ++i) {
    const Result<peer::RankTable>& table = joiners.result(i);
    ASSERT_TRUE(table.isOk()) << table.status().toString();
    EXPECT_EQ(table.value().nranks, 2u);
  }
}

}  // namespace
}  // namespace hc::control::testing
