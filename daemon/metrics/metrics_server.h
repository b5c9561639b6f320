// MetricsServer: serves DaemonMetrics as `GET /metrics` over HTTP (civetweb), for Prometheus.
// Depends on daemon_metrics.h, hc_common, spdlog and civetweb (civetweb.h stays in the .cc).
//
// Threads: civetweb's own (a listener and two workers) answer requests and call
// DaemonMetrics::render(); start() and the destructor run on the owner's thread.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/listen_address.h"

struct mg_context;
struct mg_connection;

namespace hc::metrics {

class MetricsServer {
 public:
  // Binds `listen` ("host:port" or "[v6]:port"; port 0 = any free port, see port()) and serves:
  //   GET /metrics -> 200, text/plain; version=0.0.4; charset=utf-8, the rendered metrics;
  //   other paths -> 404; other methods on /metrics -> 405.
  // Errors: InvalidArgument for a malformed address, or an IPv6 one when the system's civetweb
  // was built without IPv6 (Debian 12's is); Unavailable when the address cannot be bound (in
  // use, not local, unresolvable), with civetweb's reason. Logs the bound URL, or the error.
  // Borrowed: `metrics` must outlive the server.
  // Side effect of civetweb: the process ignores SIGPIPE from here on.
  [[nodiscard]] static Result<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                                    const DaemonMetrics& metrics);
  // Stops listening and waits for requests in flight (milliseconds; see the .cc for why it
  // knocks on its own port).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound TCP port (the chosen one when listen asked for port 0).
  int port() const { return port_; }

 private:
  explicit MetricsServer(const DaemonMetrics& metrics) : metrics_(metrics) {}

  // civetweb callbacks; user_data is the MetricsServer.
  static int onRequest(mg_connection* conn);
  static int onLogMessage(const mg_connection* conn, const char* message);

  const DaemonMetrics& metrics_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::optional<SocketAddress> wakeAddress_;  // where the destructor knocks
  // civetweb reports why a start failed only through its log callback; start() collects those
  // lines here to put the reason into its Status.
  std::mutex logMu_;
  bool starting_ = true;    // guarded by logMu_
  std::string startupLog_;  // guarded by logMu_
};

}  // namespace hc::metrics
