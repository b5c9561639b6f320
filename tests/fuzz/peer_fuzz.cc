// The daemons' Peer messages (proto/hetero_comm/v1/peer.proto) from raw bytes, as gRPC hands them
// over, through the checks daemon/control makes before acting on them:
//   JoinRequest (PeerService::admit): both nonces, the join (fromProto), the wire version, the
//     membership proof, validateJoin;
//   JoinResponse (PeerClient's answer): the wire version, the rank table (fromProto and
//     validateRankTable), the table proof, then the node layout the engine builds from it for
//     each node (Engine::formAcrossNodes);
//   ChallengeResponse: the nonce; CommProgressRequest: the nonce and the progress proof.
// A wrong proof stops nothing here: a member of the cluster holds the token and may send any
// bytes, so the checks after the proof must hold against any of them. What the root accepts
// must convert back to the same message, and a rank table back to the same table.
// libprotobuf-mutator is not packaged for Debian, so the mutations are on the raw bytes; the
// seeds (valid messages with valid proofs) give the fuzzer the wire format to start from.
// Input: byte 0 selects the message (peer_fixture.h, PeerKind), the rest is the message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/coll/hier/node_layout.h"
#include "daemon/control/peer_convert.h"
#include "tests/fuzz/peer_fixture.h"

namespace {

namespace v1 = hetero_comm::v1;
using namespace hc;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "peer: %s\n", what);
  std::abort();
}

void joinAtRoot(const v1::JoinRequest& request) {
  auto rootNonce = control::nonceOf(request.nonce(), "nonce");
  auto joinerNonce = control::nonceOf(request.joiner_nonce(), "joiner_nonce");
  if (!rootNonce.isOk() || !joinerNonce.isOk()) return;
  auto join = control::fromProto(request);
  if (!join.isOk() || join->wireVersion != peer::wireVersion()) return;
  (void)control::verifyJoinProof(fuzz::fuzzToken(), *rootNonce, *joinerNonce, *join,
                                 control::bytesOf(request.proof()));
  if (!peer::validateJoin(*join).isOk()) return;
  v1::JoinRequest again;
  control::toProto(*join, *rootNonce, *joinerNonce, {}, &again);
  auto back = control::fromProto(again);
  require(back.isOk() && control::joinProofMessage(*rootNonce, *joinerNonce, *back) ==
                             control::joinProofMessage(*rootNonce, *joinerNonce, *join),
          "an accepted join does not convert back to the same join");
}

void answerAtJoiner(const v1::JoinResponse& response) {
  const uint32_t rootVersion = response.wire_version() == 0 ? 1 : response.wire_version();
  if (rootVersion != peer::wireVersion()) return;
  auto table = control::fromProto(response.table());
  if (!table.isOk()) return;
  (void)control::verifyTableProof(fuzz::fuzzToken(), fuzz::fuzzJoinerNonce(), fuzz::fuzzCommKey(),
                                  *table, control::bytesOf(response.table_proof()));
  v1::RankTable again;
  control::toProto(*table, &again);
  auto back = control::fromProto(again);
  require(back.isOk() && *back == *table, "an accepted rank table does not convert back");
  for (uint32_t self = 0; self < table->nodes.size(); ++self) {
    std::vector<std::vector<uint32_t>> ranksOfNode;
    for (const auto& node : table->nodes) ranksOfNode.push_back(node.ranks);
    (void)coll::hier::NodeLayout::make(self, std::move(ranksOfNode));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto kind = static_cast<fuzz::PeerKind>(data[0] % fuzz::kPeerKinds);
  const void* message = data + 1;
  const int bytes = static_cast<int>(size - 1);
  switch (kind) {
    case fuzz::PeerKind::JoinRequest: {
      v1::JoinRequest request;
      if (request.ParseFromArray(message, bytes)) joinAtRoot(request);
      break;
    }
    case fuzz::PeerKind::JoinResponse: {
      v1::JoinResponse response;
      if (response.ParseFromArray(message, bytes)) answerAtJoiner(response);
      break;
    }
    case fuzz::PeerKind::ChallengeResponse: {
      v1::ChallengeResponse challenge;
      if (challenge.ParseFromArray(message, bytes)) {
        (void)control::nonceOf(challenge.nonce(), "nonce");
      }
      break;
    }
    case fuzz::PeerKind::CommProgressRequest: {
      v1::CommProgressRequest request;
      if (!request.ParseFromArray(message, bytes)) break;
      auto nonce = control::nonceOf(request.nonce(), "nonce");
      if (nonce.isOk()) {
        (void)control::verifyProgressProof(fuzz::fuzzToken(), *nonce, request.identity(),
                                           request.comm_key(), control::bytesOf(request.proof()));
      }
      break;
    }
  }
  return 0;
}
