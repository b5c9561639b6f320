// Server: hetero-commd's lifecycle. Owns the client socket, the IPC thread's epoll loop (client
// sockets, their eventfds, the pool's and the NetExecutor's done eventfds, signals), the sessions,
// the engine, with peer.listen set the daemon's multi-node half (PeerSide), and the [control]
// listeners (ControlSide: grpc.health.v1.Health and hetero_comm.v1.Control).
// Ready for systemd (READY=1) once the socket listens; SIGTERM drains and returns exit code 0.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <map>
#include <memory>

#include "common/heartbeat.h"
#include "common/unique_fd.h"
#include "daemon/coll/reduction_pool.h"
#include "daemon/config/daemon_config.h"
#include "daemon/device/registry.h"
#include "daemon/discovery/device_board.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/server/control_side.h"
#include "daemon/server/listener.h"
#include "daemon/server/peer_side.h"
#include "daemon/session/engine.h"
#include "daemon/session/session.h"
#include "daemon/observe/status_board.h"

namespace hc::server {

class Server {
 public:
  // Blocks SIGTERM/SIGINT for the whole process: call before any other thread starts.
  static Result<std::unique_ptr<Server>> create(const config::DaemonConfig& config);
  ~Server();

  // Serves until SIGTERM or SIGINT; returns the process exit code.
  int run();

 private:
  explicit Server(const config::DaemonConfig& config);
  Status watch(int fd, uint64_t tag, uint32_t events);
  void acceptClients();
  void onClientSocket(const session::SessionPtr& s);
  // `s` by value: the caller's reference may be the sessions_ entry this erases.
  void closeSession(session::SessionPtr s, const Status& why, bool tellClient);
  bool drainRings();
  bool ringsPending() const;
  void setSleeping(uint32_t value);
  int sleepTimeoutMs() const;
  // Closes connections that sent no Hello within session.hello_timeout_ms.
  void closeSilentConnections(std::chrono::steady_clock::time_point now);
  // What a uid's connections hold: how many, and their segments' bytes.
  size_t connectionsOf(uid_t uid) const;
  uint64_t segmentBytesOf(uid_t uid) const;
  // Ok when a Hello's segment fits its uid's session.max_segment_bytes_per_uid.
  Status segmentBudget(const session::Session& s, const ipc::HelloFrame& hello) const;
  void beginShutdown();
  void notifyStatus();

  config::DaemonConfig config_;
  AccessPolicy policy_;
  // The other loops' heartbeats (reduction workers, the NetExecutor's progress thread): the
  // watchdog is fed only while none is stuck. Before the pool and PeerSide, which hold beats.
  HeartbeatBoard heartbeats_;
  // Clients and communicators as the control plane reads them; before the engine and the
  // control listeners, which borrow it.
  observe::StatusBoard board_;
  // The Prometheus metrics and their /metrics endpoint (metrics.listen); before the engine,
  // which reports to them.
  std::unique_ptr<metrics::DaemonMetrics> metrics_;
  std::unique_ptr<metrics::MetricsServer> metricsServer_;
  UniqueFd epoll_;
  UniqueFd listen_;
  UniqueFd signals_;
  bool ownsSocketPath_ = false;
  std::unique_ptr<coll::ReductionPool> pool_;
  // Before the engine and the sessions: their streams and device mappings go first.
  device::DeviceRegistry devices_;
  // The inventory with each GPU's measured speed, read by Control, /metrics and the sessions
  // (DeviceQuery). After devices_ (it measures them) and metrics_ (it sets their gauges), before
  // the control side and the sessions, which read it.
  std::unique_ptr<discovery::DeviceBoard> deviceBoard_;
  // Before the engine: the engine borrows from it, so it is destroyed after (~Server shuts its
  // joins down first, since their callbacks reach into the engine).
  std::unique_ptr<PeerSide> peer_;
  std::unique_ptr<session::Engine> engine_;
  // Health and Control; borrows nothing from the others, and goes first in ~Server so that
  // watchers hear the end before the rest is torn down.
  std::unique_ptr<ControlSide> control_;
  // Before sessions_: their allocations' pre-faults may still be queued when they go. Made in
  // create(), once SIGTERM is blocked, so that its thread never takes the signal.
  std::unique_ptr<session::Prefaulter> prefaulter_;
  std::map<uint32_t, session::SessionPtr> sessions_;
  // Connections not welcomed yet, by session id: when their Hello is due.
  std::map<uint32_t, std::chrono::steady_clock::time_point> helloDue_;
  uint32_t nextSessionId_ = 1;
  bool stopping_ = false;
  // systemd's watchdog (WatchdogSec=): WATCHDOG=1 at half the interval from the IPC loop, which
  // sleeps no longer than that; zero when the watchdog is off.
  std::chrono::milliseconds watchdogEvery_{0};
  std::chrono::steady_clock::time_point lastWatchdog_{};
  bool withheld_ = false;  // a stuck loop was logged; WATCHDOG=1 is held back until it turns
};

}  // namespace hc::server
