#include "daemon/metrics/metrics_server.h"

#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <string_view>
#include <thread>

namespace hc::metrics {
namespace {

// The content type Prometheus expects for the text exposition format 0.0.4.
constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// One complete response; the connection closes after it (civetweb's keep-alive is off), so a
// scrape is one short request and no worker stays parked on an idle client.
int reply(mg_connection* conn, int status, std::string_view reason, std::string_view contentType,
          std::string_view body, std::string_view extraHeaders = {}) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  head += "Content-Type: " + std::string(contentType) + "\r\n";
  head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  head += extraHeaders;
  head += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  mg_write(conn, head.data(), head.size());
  const mg_request_info* info = mg_get_request_info(conn);
  const bool isHead =
      info && info->request_method && std::string_view(info->request_method) == "HEAD";
  if (!body.empty() && !isHead) mg_write(conn, body.data(), body.size());
  return status;  // civetweb: a nonzero return means "handled"; the value is the status code
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                            const DaemonMetrics& metrics) {
  auto address = parseListenAddress(listen, mg_check_feature(MG_FEATURES_IPV6) != 0);
  if (!address) {
    spdlog::error("{}", address.status().message());
    return address.status();
  }
  // Once per process, before any other civetweb call; the library is never unloaded.
  static std::once_flag initOnce;
  std::call_once(initOnce, [] { mg_init_library(0); });

  std::unique_ptr<MetricsServer> server(new MetricsServer(metrics));
  mg_callbacks callbacks{};
  callbacks.begin_request = &MetricsServer::onRequest;
  callbacks.log_message = &MetricsServer::onLogMessage;
  const std::string ports = address->host + ":" + std::to_string(address->port);
  // Two workers: a scrape renders in microseconds and the node has few cores to spare. No
  // document_root: nothing but our handler ever answers. The timeout frees a worker from a
  // client that connects and says nothing.
  const char* options[] = {"listening_ports",    ports.c_str(), "num_threads", "2",
                           "request_timeout_ms", "10000",       nullptr};
  mg_init_data init{&callbacks, server.get(), options};
  char errorText[256] = "";
  unsigned errorCode = 0;
  mg_error_data error{&errorCode, errorText, sizeof errorText};
  server->ctx_ = mg_start2(&init, &error);
  {
    std::lock_guard lock(server->logMu_);
    server->starting_ = false;
    if (server->ctx_ == nullptr) {
      // civetweb's log names the cause ("cannot bind to 127.0.0.1:9410: 98 (Address already in
      // use)"); errorText only says "Failed to setup server ports".
      const std::string why =
          server->startupLog_.empty() ? std::string(errorText) : server->startupLog_;
      Status status = unavailable("metrics endpoint on " + listen + ": " + why);
      spdlog::error("{}", status.message());
      return status;
    }
  }
  mg_server_port bound{};
  if (mg_get_server_ports(server->ctx_, 1, &bound) != 1) {
    return internalError("metrics endpoint on " + listen + ": civetweb reports no bound port");
  }
  server->port_ = bound.port;
  server->wakeAddress_ = localAddressOf(address->host, server->port_);
  spdlog::info("metrics listening on http://{}:{}/metrics", address->host, server->port_);
  return server;
}

MetricsServer::~MetricsServer() {
  if (ctx_ == nullptr) return;
  // mg_stop() joins civetweb's listener thread, which sees the stop flag only when its poll() on
  // the listening socket returns: after up to 2 s (civetweb's SOCKET_TIMEOUT_QUANTUM), which
  // every daemon shutdown and every test would pay. An incoming connection ends the poll at
  // once, so mg_stop runs on a helper thread while this one knocks every few milliseconds until
  // it is done. A knock that lands before the flag is set reaches a worker as a connection that
  // closes without a request; without a wake address this is the plain 2 s wait, still bounded.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    mg_stop(ctx_);
    stopped.store(true);
  });
  while (!stopped.load()) {
    if (wakeAddress_) connectAndClose(*wakeAddress_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
}

int MetricsServer::onRequest(mg_connection* conn) {
  auto* self = static_cast<MetricsServer*>(mg_get_user_data(mg_get_context(conn)));
  const mg_request_info* info = mg_get_request_info(conn);
  // local_uri is the decoded path without the query string: "/metrics?x=1" is "/metrics".
  const std::string_view path = info->local_uri ? info->local_uri : "";
  const std::string_view method = info->request_method ? info->request_method : "";
  if (path != "/metrics") {
    return reply(conn, 404, "Not Found", "text/plain; charset=utf-8",
                 "not found: metrics are served at /metrics\n");
  }
  if (method != "GET") {
    return reply(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                 "method not allowed: use GET\n", "Allow: GET\r\n");
  }
  return reply(conn, 200, "OK", kMetricsContentType, self->metrics_.render());
}

int MetricsServer::onLogMessage(const mg_connection* conn, const char* message) {
  const mg_context* ctx = conn ? mg_get_context(conn) : nullptr;
  auto* self = ctx ? static_cast<MetricsServer*>(mg_get_user_data(ctx)) : nullptr;
  if (self != nullptr) {
    std::lock_guard lock(self->logMu_);
    if (self->starting_) {
      if (!self->startupLog_.empty()) self->startupLog_ += "; ";
      self->startupLog_ += message;
      return 1;
    }
  }
  // After start: a client's broken request or a socket error; worth a look, never fatal.
  spdlog::warn("metrics endpoint: {}", message);
  return 1;  // handled: civetweb prints nothing to stderr itself
}

}  // namespace hc::metrics
