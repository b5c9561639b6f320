// PeerClient: how a daemon joins a communicator at its root daemon (Peer.Challenge, then
// Peer.Join with the membership proof). Thread-safe; one per daemon is enough, and it keeps one
// gRPC channel per root address.
//
// Lifetime: the PeerClient owns the channels, and a channel must never lose its last reference
// on one of gRPC's callback threads (libgrpc++ 1.51 then releases its callback queue from the
// thread that serves it and aborts). So the destructor cancels the joins under way and waits
// until gRPC has let go of them; never destroy a PeerClient from one of its own callbacks.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "daemon/control/cluster_token.h"
#include "daemon/peer/peer_types.h"

namespace hc::control {

struct PeerClientOptions {
  // The cluster token file: mode 0600 (cluster_token.h).
  std::string tokenPath;
  // Wait for a root that is not listening yet (daemons start in any order) until the deadline,
  // rather than failing at once with Unavailable.
  bool waitForRoot = true;
  // How long past the deadline the gRPC call lives, so that the root's own, clearer deadline
  // error (naming the missing ranks) arrives before gRPC's.
  std::chrono::milliseconds replyGrace{2'000};
};

using JoinCallback = std::function<void(Result<peer::RankTable>)>;
using JoinId = uint64_t;

namespace detail {
class JoinCall;
struct JoinsInFlight;
class CapacityPauses;
}  // namespace detail

class PeerClient {
 public:
  using Clock = std::chrono::steady_clock;

  // Reads the token (PermissionDenied for an unsafe file).
  [[nodiscard]] static Result<std::unique_ptr<PeerClient>> create(const PeerClientOptions& options);

  // Cancels the joins under way (their callbacks get Unavailable) and waits for gRPC to release
  // them: returns within milliseconds. Not from a join callback.
  ~PeerClient();
  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  // Joins `request.key` at the root `rootAddress` ("host:port") and calls `done` once with the
  // rank table or the error; Timeout when the deadline passes first. A root that refuses for
  // capacity (NoResource) is asked again, after pauses from 20 ms to 1 s, until the deadline,
  // whose refusal is then the answer. The request's timeout is
  // set from the deadline. Non-blocking: `done` runs on a gRPC thread, or on this one when the
  // join fails before any RPC; it must not block.
  // Returns an id for withdraw() (0 when `done` already ran).
  JoinId joinAsync(const std::string& rootAddress, peer::JoinRequest request,
                   Clock::time_point deadline, JoinCallback done);
  // Takes back a join under way, as when its client went away: the root forgets its ranks, and
  // `done` runs with Unavailable (or with the answer, if one came first). Any thread but a join
  // callback; an id that finished is ignored.
  void withdraw(JoinId id);
  // Blocking form of joinAsync: returns by the deadline plus replyGrace at the latest.
  [[nodiscard]] Result<peer::RankTable> join(const std::string& rootAddress,
                                             const peer::JoinRequest& request,
                                             Clock::time_point deadline);

 private:
  PeerClient(ClusterToken token, const PeerClientOptions& options);
  std::shared_ptr<grpc::Channel> channelFor(const std::string& rootAddress);

  const std::shared_ptr<const ClusterToken> token_;
  const PeerClientOptions options_;
  // Shared with every JoinCall, which may outlive the PeerClient by a few instructions.
  const std::shared_ptr<detail::JoinsInFlight> inFlight_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  // Joins the root refused for capacity wait here before asking again (until their deadline).
  const std::unique_ptr<detail::CapacityPauses> pauses_;
};

}  // namespace hc::control
