// Seeds of the peer target: one message of each kind the daemons exchange at Peer.Join and
// GetCommProgress, with proofs made with the fuzz token, so each passes every check, the proofs
// included (peer_fixture.h).
#include <string>
#include <utility>

#include "daemon/control/peer_convert.h"
#include "daemon/transport/transport.h"
#include "tests/fuzz/peer_fixture.h"
#include "tests/fuzz/seeds.h"

namespace hc::fuzz {
namespace {

namespace v1 = hetero_comm::v1;

void add(std::vector<Seed>* seeds, const std::string& name, PeerKind kind,
         const google::protobuf::MessageLite& message, bool valid, const std::string& why) {
  Seed seed{"peer", name, {static_cast<uint8_t>(kind)}};
  const std::string bytes = message.SerializeAsString();
  seed.bytes.insert(seed.bytes.end(), bytes.begin(), bytes.end());
  requireValid(valid, seed, why);
  seeds->push_back(std::move(seed));
}

control::Nonce rootNonce() {
  control::Nonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0x10 + i);
  return n;
}

}  // namespace

std::vector<Seed> peerSeeds() {
  std::vector<Seed> seeds;
  const control::ClusterToken& token = fuzzToken();

  peer::JoinRequest join;
  join.key = fuzzCommKey();
  join.nranks = 4;
  join.ranks = {2, 0};
  join.node = {"node-a", "6f1c2d3e-0000-4000-8000-000000000001", "10.0.0.1:7710"};
  join.transportAddress = "HCUX worker address";
  join.timeout = std::chrono::milliseconds(30000);
  join.wireVersion = peer::wireVersion();
  const control::Proof joinProof =
      control::computeJoinProof(token, rootNonce(), fuzzJoinerNonce(), join);
  v1::JoinRequest request;
  control::toProto(join, rootNonce(), fuzzJoinerNonce(), joinProof, &request);
  auto parsed = control::fromProto(request);
  add(&seeds, "join_request", PeerKind::JoinRequest, request,
      parsed.isOk() && peer::validateJoin(*parsed).isOk() &&
          control::verifyJoinProof(token, rootNonce(), fuzzJoinerNonce(), *parsed,
                                   control::bytesOf(request.proof())),
      "the join or its proof is refused");

  peer::RankTable table;
  table.nranks = 4;
  table.identity = transport::kFirstCommIdentity + 0x1234;
  table.nodes = {{{"node-a", "boot-a", "10.0.0.1:7710"}, "address a", {0, 2}},
                 {{"node-b", "boot-b", "10.0.0.2:7710"}, "address b", {1, 3}}};
  table.ranks = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  v1::JoinResponse response;
  control::toProto(table, response.mutable_table());
  const control::Proof tableProof =
      control::computeTableProof(token, fuzzJoinerNonce(), fuzzCommKey(), table);
  response.set_table_proof(tableProof.data(), tableProof.size());
  response.set_wire_version(peer::wireVersion());
  auto back = control::fromProto(response.table());
  add(&seeds, "join_response", PeerKind::JoinResponse, response,
      back.isOk() && control::verifyTableProof(token, fuzzJoinerNonce(), fuzzCommKey(), *back,
                                               control::bytesOf(response.table_proof())),
      "the rank table or its proof is refused");

  v1::ChallengeResponse challenge;
  challenge.set_nonce(rootNonce().data(), rootNonce().size());
  challenge.set_ttl_ms(10000);
  add(&seeds, "challenge_response", PeerKind::ChallengeResponse, challenge,
      control::nonceOf(challenge.nonce(), "nonce").isOk(), "the nonce is refused");

  v1::CommProgressRequest progress;
  progress.set_comm_key("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  progress.set_identity(table.identity);
  progress.set_nonce(rootNonce().data(), rootNonce().size());
  const control::Proof progressProof =
      control::computeProgressProof(token, rootNonce(), progress.identity(), progress.comm_key());
  progress.set_proof(progressProof.data(), progressProof.size());
  add(&seeds, "comm_progress_request", PeerKind::CommProgressRequest, progress,
      control::verifyProgressProof(token, rootNonce(), progress.identity(), progress.comm_key(),
                                   control::bytesOf(progress.proof())),
      "the progress proof is refused");
  return seeds;
}

}  // namespace hc::fuzz
