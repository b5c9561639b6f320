// PeerClient: how a daemon joins a communicator at its root daemon (Peer.Challenge, then
// Peer.Join with the membership proof). Thread-safe; one per daemon is enough, and it keeps one
// gRPC channel per root address and receive limit (joinReceiveLimit).
//
// Lifetime: the PeerClient owns the channels, and a channel must never lose its last reference
// on one of gRPC's callback threads (libgrpc++ 1.51 then releases its callback queue from the
// thread that serves it and aborts). So the destructor cancels the joins under way and waits
// until gRPC has let go of them; never destroy a PeerClient from one of its own callbacks.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/status.h"
#include "daemon/control/cluster_token.h"
#include "daemon/peer/peer_types.h"

namespace hc::control {

// How much of a root's answer a joiner takes in. The root's proof can be checked only once the
// answer is parsed, so a root without the cluster token could otherwise make every joiner receive
// and parse as much as gRPC allows (a fake root once cost a joiner 1.8 GB). A joiner accepts what
// an honest answer to its own join can be: gRPC refuses a longer answer before parsing it, and the
// channel's memory quota stops gRPC reading it in full (peer_client.cc, RootChannel).
//
// The ceiling, whatever nranks: about 4,000 nodes at the largest transport address. Larger
// honest tables (more nodes with addresses that large) cannot be received.
constexpr size_t kMaxRankTableBytes = size_t{256} << 20;
// The least a joiner accepts, whatever the bound below says.
constexpr size_t kMinJoinResponseBytes = size_t{64} << 10;

// The most bytes an honest root's Peer.Join answer to a join of `nranks` ranks can take: a
// RankTable of nranks placements and at most nranks nodes (each brings a rank), every node with
// identity fields of peer::kMaxIdentityFieldBytes and a transport address of
// peer::kMaxTransportAddressBytes (the root refuses larger joins), plus the proof and the wire
// version; every field with its protobuf tag and length at their longest. Clamped to
// [kMinJoinResponseBytes, kMaxRankTableBytes]. A field added to JoinResponse or RankTable must be
// counted here (peer_client_limit_test checks the bound against the real conversion).
[[nodiscard]] size_t maxJoinResponseBytes(uint32_t nranks);
// The receive limit of the channel a join of `nranks` uses: maxJoinResponseBytes rounded up to a
// power of two, so that one root is reached by at most 13 channels (64 KiB to 256 MiB).
[[nodiscard]] size_t joinReceiveLimit(uint32_t nranks);

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
class RootChannel;
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
  // rank table or the error; Timeout when the deadline passes first; RemoteError, unparsed, for
  // an answer over joinReceiveLimit(request.nranks). A root that refuses for capacity
  // (NoResource) is asked again, after pauses from 20 ms to 1 s, until the deadline,
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
  std::shared_ptr<detail::RootChannel> channelFor(const std::string& rootAddress,
                                                  size_t receiveLimit);

  const std::shared_ptr<const ClusterToken> token_;
  const PeerClientOptions options_;
  // Shared with every JoinCall, which may outlive the PeerClient by a few instructions.
  const std::shared_ptr<detail::JoinsInFlight> inFlight_;
  std::mutex mutex_;
  // By root address and receive limit: gRPC takes the limit per channel, not per call.
  std::map<std::pair<std::string, size_t>, std::shared_ptr<detail::RootChannel>> channels_;
  // Joins the root refused for capacity wait here before asking again (until their deadline).
  const std::unique_ptr<detail::CapacityPauses> pauses_;
};

}  // namespace hc::control
