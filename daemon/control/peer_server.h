// PeerServer: the Peer listener of a daemon, on its own address and port (apart from the control
// listener), serving PeerService for the communicators this daemon is root of.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/control/join_registry.h"
#include "daemon/control/membership_proof.h"
#include "daemon/control/peer_service.h"
#include "daemon/observe/status_board.h"

namespace hc::control {

// The largest Peer request the root reads: an honest JoinRequest, at most 3,195,678 bytes (every
// rank of a communicator of peer::kMaxRanks brought by one node, the longest identity and
// address; peer_server_limit_test checks it against the real conversion), fits with room to spare.
constexpr size_t kMaxJoinRequestBytes = size_t{4} << 20;
// What the Peer listener's connections may hold in memory at once, reading requests included:
// gRPC reads a whole message before it checks it against kMaxJoinRequestBytes, so without a
// quota a stranger's padded request of any length would be read in full (4 of 64 MiB at once
// took a root to 253 MiB). Room for several of the largest honest joins at once; past it gRPC
// resets the streams it is reading (RESOURCE_EXHAUSTED). gRPC reclaims after the fact, so the
// peak can reach about twice this (peer_server_limit_test).
constexpr size_t kPeerListenerMemoryBytes = size_t{32} << 20;

// Room for mTLS on the Peer listener. Not supported yet: start() refuses options that set it.
struct PeerTlsOptions {
  std::string certificatePath;  // PEM chain this daemon presents
  std::string privateKeyPath;   // its key, mode 0600
  std::string trustedCaPath;    // CA that signs every daemon of the cluster

  bool enabled() const {
    return !certificatePath.empty() || !privateKeyPath.empty() || !trustedCaPath.empty();
  }
};

struct PeerServerOptions {
  // The interface and port to listen on, "host:port"; port 0 picks a free one (see port()).
  std::string bindAddress = "127.0.0.1:0";
  // The cluster token file: mode 0600 (cluster_token.h).
  std::string tokenPath;
  // Used by joins that bring no timeout of their own, and the most any join may wait.
  std::chrono::milliseconds defaultJoinTimeout{120'000};
  std::chrono::milliseconds nonceTtl{10'000};
  // The most verified joins (and progress queries) within one nonce lifetime.
  size_t maxSpentNonces = 65'536;
  // Communicators forming at this root at once, in all and opened by one node (join_registry.h).
  size_t maxPendingComms = JoinRegistryOptions{}.maxPendingComms;
  size_t maxPendingCommsPerNode = JoinRegistryOptions{}.maxPendingCommsPerNode;
  PeerTlsOptions tls;
  // Answers Peer.GetCommProgress from it; null: NOT_FOUND for every communicator. Borrowed:
  // outlives the server.
  const observe::StatusBoard* board = nullptr;
};

class PeerServer {
 public:
  // Reads the token, binds, and starts serving. PermissionDenied for an unsafe token file;
  // Unavailable when the address cannot be bound.
  [[nodiscard]] static Result<std::unique_ptr<PeerServer>> start(const PeerServerOptions& options);
  ~PeerServer();  // shutdown()

  // The port actually bound (useful with port 0).
  int port() const { return port_; }
  // Fails every pending join with Unavailable, then stops the listener and waits for the RPCs
  // under way. Idempotent; any thread but a gRPC callback.
  void shutdown();

  // For tools and tests: pending joins at this root.
  const JoinRegistry& registry() const { return *registry_; }

 private:
  PeerServer() = default;

  // Destroyed in reverse: the server first, then what its reactors borrow.
  std::unique_ptr<JoinRegistry> registry_;
  std::unique_ptr<NonceBook> nonces_;
  std::unique_ptr<PeerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace hc::control
