#include "daemon/control/peer_service.h"

#include <spdlog/spdlog.h>

#include "daemon/control/grpc_status.h"
#include "daemon/control/peer_convert.h"

namespace hc::control {
namespace {

// One pending Join. Settled exactly once: by the registry's callback, or by OnCancel when
// withdraw() took it back first; gRPC then calls OnDone, which frees it.
class JoinReactor final : public grpc::ServerUnaryReactor {
 public:
  JoinReactor(JoinRegistry& registry, const ClusterToken& token, const peer::CommKey& key,
              const Nonce& joinerNonce, hetero_comm::v1::JoinResponse* response)
      : registry_(registry),
        token_(token),
        key_(key),
        joinerNonce_(joinerNonce),
        ticket_(registry.newTicket()),
        response_(response) {}

  JoinTicket ticket() const { return ticket_; }

  void complete(const Result<peer::RankTable>& result) {
    if (result.isOk()) {
      toProto(result.value(), response_->mutable_table());
      Proof proof = computeTableProof(token_, joinerNonce_, key_, result.value());
      response_->set_table_proof(proof.data(), proof.size());
      response_->set_wire_version(peer::wireVersion());
    }
    Finish(toGrpcStatus(result.status()));  // `this` may be gone from here on
  }

  // grpc::ServerUnaryReactor
  void OnCancel() override {
    if (registry_.withdraw(key_, ticket_)) {
      Finish({grpc::StatusCode::CANCELLED, "the joiner cancelled the join"});
    }
  }
  void OnDone() override { delete this; }

 private:
  JoinRegistry& registry_;
  const ClusterToken& token_;  // the service's, which outlives every reactor
  const peer::CommKey key_;
  const Nonce joinerNonce_;
  const JoinTicket ticket_;
  hetero_comm::v1::JoinResponse* const response_;  // owned by gRPC until OnDone
};

}  // namespace

PeerService::PeerService(ClusterToken token, NonceBook& nonces, JoinRegistry& registry,
                         const observe::StatusBoard* board)
    : token_(std::move(token)), nonces_(nonces), registry_(registry), board_(board) {}

grpc::ServerUnaryReactor* PeerService::Challenge(grpc::CallbackServerContext* context,
                                                 const hetero_comm::v1::ChallengeRequest*,
                                                 hetero_comm::v1::ChallengeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Result<Nonce> nonce = nonces_.issue();
  if (nonce.isOk()) {
    response->set_nonce(nonce->data(), nonce->size());
    response->set_ttl_ms(static_cast<uint32_t>(nonces_.ttl().count()));
  }
  reactor->Finish(toGrpcStatus(nonce.status()));
  return reactor;
}

Result<PeerService::Admitted> PeerService::admit(const hetero_comm::v1::JoinRequest& request,
                                                 const std::string& peer) {
  if (!nonces_.valid(bytesOf(request.nonce()))) {
    return Status(Code::PermissionDenied,
                  "join refused: its nonce is unknown, expired or already used (call Challenge "
                  "once per Join)");
  }
  Result<Nonce> rootNonce = nonceOf(request.nonce(), "nonce");
  Result<Nonce> joinerNonce = nonceOf(request.joiner_nonce(), "joiner_nonce");
  if (!joinerNonce.isOk()) return joinerNonce.status();
  Result<peer::JoinRequest> join = fromProto(request);
  if (!join.isOk()) return join.status();
  // Before the proof: a daemon of another version may also prove membership another way, and
  // its operator needs the versions, not "wrong proof".
  if (join->wireVersion != peer::wireVersion()) {
    spdlog::warn("peer bootstrap: refused a join from {}: {}", peer,
                 peer::wireVersionMismatch("it", join->wireVersion, peer::wireVersion()));
    return Status(Code::InvalidArgument,
                  "join refused by the root: " + peer::wireVersionMismatch("the joining daemon",
                                                                           join->wireVersion,
                                                                           peer::wireVersion()));
  }
  if (!verifyJoinProof(token_, rootNonce.value(), joinerNonce.value(), join.value(),
                       bytesOf(request.proof()))) {
    spdlog::warn("peer bootstrap: refused a join from {}: wrong membership proof", peer);
    return Status(Code::PermissionDenied,
                  "join refused: the membership proof does not match (the joining daemon's "
                  "cluster token differs from the root's)");
  }
  HC_RETURN_IF_ERROR(peer::validateJoin(join.value()));
  // Spent once the proof holds: a replay of this join, even one racing it, finds it spent.
  Status spent = nonces_.spend(bytesOf(request.nonce()));
  if (!spent.isOk()) return Status(spent.code(), "join refused: " + spent.message());
  return Admitted{std::move(join).value(), joinerNonce.value()};
}

grpc::ServerUnaryReactor* PeerService::Join(grpc::CallbackServerContext* context,
                                            const hetero_comm::v1::JoinRequest* request,
                                            hetero_comm::v1::JoinResponse* response) {
  Result<Admitted> admitted = admit(*request, context->peer());
  if (!admitted.isOk()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(toGrpcStatus(admitted.status()));
    return reactor;
  }
  auto* reactor =
      new JoinReactor(registry_, token_, admitted->join.key, admitted->joinerNonce, response);
  registry_.add(reactor->ticket(), std::move(admitted->join),
                [reactor](Result<peer::RankTable> result) { reactor->complete(result); });
  return reactor;
}

grpc::ServerUnaryReactor* PeerService::GetCommProgress(
    grpc::CallbackServerContext* context, const hetero_comm::v1::CommProgressRequest* request,
    hetero_comm::v1::CommProgressResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto answer = [&]() -> Status {
    if (!nonces_.valid(bytesOf(request->nonce()))) {
      return Status(Code::PermissionDenied,
                    "progress refused: its nonce is unknown, expired or already used");
    }
    Result<Nonce> nonce = nonceOf(request->nonce(), "nonce");
    if (!nonce.isOk()) return nonce.status();
    if (!verifyProgressProof(token_, nonce.value(), request->identity(), request->comm_key(),
                             bytesOf(request->proof()))) {
      spdlog::warn("peer: refused a progress query from {}: wrong membership proof",
                   context->peer());
      return Status(Code::PermissionDenied,
                    "progress refused: the membership proof does not match (another cluster "
                    "token)");
    }
    Status spent = nonces_.spend(bytesOf(request->nonce()));
    if (!spent.isOk()) return Status(spent.code(), "progress refused: " + spent.message());
    std::shared_ptr<const observe::FlightRecorder> comm;
    for (const auto& c : board_ ? board_->comms() : decltype(board_->comms()){}) {
      // The identity tells apart what the key alone may not (a split's key names its parent).
      if (c->identity().keyHex == request->comm_key() &&
          c->identity().wireIdentity == request->identity()) {
        comm = c;
      }
    }
    if (!comm) {
      return Status(Code::NotFound, "this daemon holds no communicator with key " +
                                        request->comm_key() + " and that identity");
    }
    for (const observe::RankProgress& p : comm->snapshot(1).ranks) {
      hetero_comm::v1::PeerRankProgress* out = response->add_ranks();
      out->set_rank(static_cast<uint32_t>(p.rank));
      out->set_collectives_posted(p.collectivesPosted);
      out->set_collectives_finished(p.collectivesFinished);
      out->set_p2p_posted(p.transfersPosted);
      out->set_p2p_finished(p.transfersFinished);
      if (p.lastPosted) {
        out->set_last_profiling_name(p.lastPosted->profilingName);
        out->set_last_collective_seq_id(p.lastPosted->collectiveSeqId);
        out->set_last_p2p_seq_id(p.lastPosted->p2pSeqId);
        out->set_last_state(observe::flightStateName(p.lastPosted->state));
      }
    }
    return okStatus();
  };
  reactor->Finish(toGrpcStatus(answer()));
  return reactor;
}

}  // namespace hc::control
