#include "daemon/control/peer_server.h"

#include <spdlog/spdlog.h>

#include "daemon/control/control_server.h"

namespace hc::control {

Result<std::unique_ptr<PeerServer>> PeerServer::start(const PeerServerOptions& options) {
  if (options.tls.enabled()) {
    return invalidArgument("mTLS on the Peer listener is not supported yet");
  }
  if (options.tokenPath.empty()) return invalidArgument("the Peer listener needs a token file");
  Result<ClusterToken> token = ClusterToken::load(options.tokenPath);
  if (!token.isOk()) return token.status();

  std::unique_ptr<PeerServer> server(new PeerServer());
  JoinRegistryOptions registryOptions;
  registryOptions.defaultTimeout = options.defaultJoinTimeout;
  // A joiner's own timeout is honoured up to this daemon's comm.init_timeout_ms, not beyond: a
  // pending communicator holds nranks-sized state at the root for as long as it may wait.
  registryOptions.maxTimeout = options.defaultJoinTimeout;
  registryOptions.maxPendingComms = options.maxPendingComms;
  registryOptions.maxPendingCommsPerNode = options.maxPendingCommsPerNode;
  server->registry_ = std::make_unique<JoinRegistry>(registryOptions);
  server->nonces_ = std::make_unique<NonceBook>(options.nonceTtl, options.maxSpentNonces);
  server->service_ = std::make_unique<PeerService>(std::move(token).value(), *server->nonces_,
                                                   *server->registry_, options.board);

  grpc::ServerBuilder builder;
  // Reflection is for operators' tools, on the control listeners only.
  builder.SetOption(serverReflectionOption(false));
  // Anyone who reaches the port can send before a proof is checked: what a request may be, and
  // what all the connections may hold while reading, are bounded (peer_server.h).
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxJoinRequestBytes));
  grpc::ResourceQuota quota("peer listener");
  quota.Resize(kPeerListenerMemoryBytes);
  builder.SetResourceQuota(quota);
  // gRPC turns SO_REUSEPORT on by default: two daemons could then share a port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.bindAddress, grpc::InsecureServerCredentials(), &server->port_);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return unavailable("cannot listen for peers on " + options.bindAddress);
  }
  spdlog::info("peer listener on {} (port {})", options.bindAddress, server->port_);
  return server;
}

PeerServer::~PeerServer() { shutdown(); }

void PeerServer::shutdown() {
  // Pending joins first: grpc::Server::Shutdown waits for every RPC under way, and a pending
  // join would otherwise keep it waiting until its deadline.
  if (registry_) registry_->shutdown();
  if (server_) {
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }
}

}  // namespace hc::control
