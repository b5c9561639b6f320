// What the engine needs of the control plane and the data plane to form and run communicators
// that span daemons. The server implements Bootstrap with the gRPC Peer client
// (daemon/control/peer_client.h) and hands over the inter-node executor; the session layer itself
// links neither gRPC nor UCX.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"
#include "daemon/coll/net/net_executor.h"
#include "daemon/peer/peer_types.h"
#include "daemon/staging/direct_probe.h"

namespace hc::session {

class Bootstrap {
 public:
  using Done = std::function<void(Result<peer::RankTable>)>;
  using JoinId = uint64_t;
  virtual ~Bootstrap() = default;
  // Joins request.ranks of communicator request.key at the root daemon `root` ("host:port").
  // `done` runs exactly once, on any thread, and must not block. Returns an id for withdraw()
  // (0 when `done` has run already).
  virtual JoinId join(const std::string& root, peer::JoinRequest request,
                      std::chrono::steady_clock::time_point deadline, Done done) = 0;
  // Takes back a join under way whose client went away, so that the root does not keep its
  // ranks: `done` then runs with Unavailable, or with the answer that came first.
  virtual void withdraw(JoinId id) = 0;
};

// Everything multi-node; absent (nullptr members) on a daemon without a Peer listener, which then
// forms communicators among its own clients only.
struct MultiNode {
  Bootstrap* bootstrap = nullptr;              // borrowed
  coll::net::NetExecutor* executor = nullptr;  // borrowed
  peer::NodeIdentity identity;                 // this daemon, as it joins
  coll::net::NetOpOptions netOptions;          // chunking and algorithm choice among daemons
  staging::DirectDevices direct;               // devices whose memory the transport takes in place
  bool enabled() const { return bootstrap != nullptr && executor != nullptr; }
};

}  // namespace hc::session
