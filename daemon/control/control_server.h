// ControlServer: the daemon's operator-facing gRPC listeners.
//   - the control server: Health + Control on the admin Unix socket and, optionally, a loopback
//     TCP address (remote control needs mTLS, which is not supported yet: the config refuses a
//     non-loopback address before this is reached);
//   - the health server: Health alone on a plaintext TCP address, for probes that carry no
//     credentials (kubelet gRPC probes, grpc_health_probe).
// Either may be off; with both off, start() serves nothing and returns a ControlServer all the
// same, so the caller has one shape to handle.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/control/control_service.h"
#include "daemon/control/health_board.h"
#include "daemon/control/health_service.h"
#include "daemon/control/node_info.h"

namespace hc::control {

struct ControlServerOptions {
  std::string adminSocket;   // Unix socket path; "" = none
  std::string listen;        // "host:port" (port 0: a free port); "" = none
  std::string healthListen;  // "host:port" for Health alone; "" = none
};

class ControlServer {
 public:
  // Binds and starts. Unavailable when an address cannot be bound or another process answers on
  // the admin socket. Logs each bound address ("control listening on ...", "health listening on
  // ...") so that operators and tests can find port-0 listeners.
  [[nodiscard]] static Result<std::unique_ptr<ControlServer>> start(
      const ControlServerOptions& options, NodeInfo node);
  ~ControlServer();  // shutdown()

  // The statuses Health reports; the caller sets them (any thread).
  HealthBoard& health() { return board_; }
  int controlPort() const { return controlPort_; }  // 0 when listen is off
  int healthPort() const { return healthPort_; }    // 0 when health_listen is off

  // Ends every Watch (after it sends what it owes), stops both servers (RPCs under way get a
  // second to finish) and removes the admin socket. Idempotent; any thread but a gRPC callback.
  void shutdown();

 private:
  explicit ControlServer(NodeInfo node);

  // Destroyed in reverse: the servers first, then the services and the board they borrow.
  HealthBoard board_;
  HealthService health_;
  ControlService control_;
  std::unique_ptr<grpc::Server> controlServer_;
  std::unique_ptr<grpc::Server> healthServer_;
  std::string adminSocket_;  // set once bound: ours to remove
  int controlPort_ = 0;
  int healthPort_ = 0;
};

}  // namespace hc::control
