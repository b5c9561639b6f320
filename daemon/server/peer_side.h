// PeerSide: the daemon among the other daemons, built from the [peer] configuration: the Peer
// gRPC listener (this daemon as a root), the Peer client that joins communicators at roots (the
// engine's Bootstrap), and the UCX endpoint with its progress thread (NetExecutor). Absent when
// peer.listen is empty: the daemon then serves single-node jobs only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/coll/net/net_executor.h"
#include "daemon/config/daemon_config.h"
#include "daemon/control/peer_client.h"
#include "daemon/control/peer_server.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/observe/status_board.h"
#include "daemon/session/bootstrap.h"
#include "daemon/staging/direct_probe.h"

namespace hc::server {

class PeerSide final : public session::Bootstrap {
 public:
  // Reads the token, binds the listener, starts UCX, probes which of `devices` the transport
  // takes in place (devices.direct), and starts the progress thread. Control path.
  // `board` (borrowed, outlives this) answers other daemons' Peer.GetCommProgress; the progress
  // thread beats a heartbeat of `heartbeats` (the watchdog's) and counts the messages it drops in
  // `metrics` (borrowed, outlives this; may be null).
  [[nodiscard]] static Result<std::unique_ptr<PeerSide>> start(
      const config::DaemonConfig& config, const device::DeviceRegistry& devices,
      const observe::StatusBoard* board, HeartbeatBoard* heartbeats,
      metrics::DaemonMetrics* metrics);
  ~PeerSide() override;

  // What the engine borrows; valid until shutdown().
  session::MultiNode multiNode();
  // What the startup probe found for each device (empty with devices.direct off).
  const std::vector<staging::DirectVerdict>& directVerdicts() const { return verdicts_; }
  // "host:port" of the Peer listener, as unique ids name it.
  const std::string& advertise() const { return advertise_; }

  // session::Bootstrap. After shutdown(), fails at once.
  JoinId join(const std::string& root, peer::JoinRequest request,
              std::chrono::steady_clock::time_point deadline, Done done) override;
  void withdraw(JoinId id) override;

  // Cancels the joins under way (their callbacks run now, with Unavailable), stops the listener
  // and the progress thread. Before the engine goes: the callbacks reach into it.
  void shutdown();

 private:
  PeerSide() = default;

  std::unique_ptr<control::PeerServer> server_;
  std::unique_ptr<control::PeerClient> client_;
  std::unique_ptr<coll::net::NetExecutor> executor_;
  peer::NodeIdentity identity_;
  std::string advertise_;
  coll::net::NetOpOptions netOptions_;
  staging::DirectDevices direct_;
  std::vector<staging::DirectVerdict> verdicts_;
};

}  // namespace hc::server
