// PeerService: hetero_comm.v1.Peer on the root daemon, with gRPC's callback API. A pending Join
// is a reactor parked in the JoinRegistry: it holds no thread while it waits for the other ranks.
//
// Join checks, in order: the nonce (spent whatever follows), the message's shape, the HMAC proof
// (PERMISSION_DENIED when it does not match), the join on its own (validateJoin), then hands the
// join to the registry, which settles it (join_registry.h has the rules). A rank table goes out
// with the root's proof over it and the joiner's nonce (membership_proof.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include "daemon/control/cluster_token.h"
#include "daemon/control/join_registry.h"
#include "daemon/control/membership_proof.h"
#include "daemon/observe/status_board.h"
#include "hetero_comm/v1/peer.grpc.pb.h"

namespace hc::control {

class PeerService final : public hetero_comm::v1::Peer::CallbackService {
 public:
  // Borrowed: the owner (PeerServer) keeps the registry and nonces alive until the gRPC server
  // has shut down and every reactor is done.
  PeerService(ClusterToken token, NonceBook& nonces, JoinRegistry& registry,
              const observe::StatusBoard* board);

  // hetero_comm::v1::Peer::CallbackService. Run on gRPC's callback threads; never block.
  grpc::ServerUnaryReactor* Challenge(grpc::CallbackServerContext* context,
                                      const hetero_comm::v1::ChallengeRequest* request,
                                      hetero_comm::v1::ChallengeResponse* response) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const hetero_comm::v1::JoinRequest* request,
                                 hetero_comm::v1::JoinResponse* response) override;
  grpc::ServerUnaryReactor* GetCommProgress(
      grpc::CallbackServerContext* context, const hetero_comm::v1::CommProgressRequest* request,
      hetero_comm::v1::CommProgressResponse* response) override;

 private:
  struct Admitted {
    peer::JoinRequest join;
    Nonce joinerNonce;
  };
  // Everything before the registry: the join, or the status to answer with at once.
  Result<Admitted> admit(const hetero_comm::v1::JoinRequest& request, const std::string& peer);

  const ClusterToken token_;
  NonceBook& nonces_;
  JoinRegistry& registry_;
  const observe::StatusBoard* board_;
};

}  // namespace hc::control
