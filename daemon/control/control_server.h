// ControlServer: the daemon's operator-facing gRPC listeners.
//   - the control server: Health + Control + server reflection (so grpcurl needs no .proto
//     files) on the admin Unix socket, plaintext (its file mode guards it; AdminListener accepts
//     its connections so each call knows its caller's uid: caller.h), and optionally on a TCP
//     address, plaintext or TLS. With a client CA the TLS is mutual: every client shows a
//     certificate that CA signed. The config allows a non-loopback address only with mutual TLS;
//   - the health server: Health alone on a plaintext TCP address, for probes that carry no
//     credentials (kubelet gRPC probes, grpc_health_probe). No reflection: it is open to anyone
//     who reaches the port, and probes have no use for it.
// Either may be off; with both off, start() serves nothing and returns a ControlServer all the
// same, so the caller has one shape to handle.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/control/admin_listener.h"
#include "daemon/control/caller.h"
#include "daemon/control/control_service.h"
#include "daemon/control/health_board.h"
#include "daemon/control/health_service.h"
#include "daemon/control/node_info.h"

namespace hc::control {

struct ControlServerOptions {
  std::string adminSocket;   // Unix socket path; "" = none
  std::string listen;        // "host:port" (port 0: a free port); "" = none
  std::string healthListen;  // "host:port" for Health alone; "" = none
  // PEM files (control.tls_*) for the listen address only; the admin socket and the health
  // listener stay plaintext. Cert and key together turn TLS on; a client CA on top requires and
  // verifies client certificates. "" = not set.
  std::string tlsCertFile;      // certificate chain, the server's own first
  std::string tlsKeyFile;       // the private key of that certificate (not encrypted)
  std::string tlsClientCaFile;  // CA certificate(s) that sign the clients' certificates
  // What Control's RPCs beyond GetNode read (clients, communicators, other daemons).
  ControlSources sources;
};

// libgrpc++_reflection, once loaded (this library links it), adds server reflection to every gRPC
// server of the process. Set this option on a ServerBuilder to decide for that server instead:
// the control server offers reflection, the Health-only server does not.
std::unique_ptr<grpc::ServerBuilderOption> serverReflectionOption(bool offered);

class ControlServer {
 public:
  // Reads and checks the TLS files, then binds and starts. A TLS file that cannot be read, holds
  // no valid PEM, or a key that does not match its certificate fails before anything binds, with
  // the config key and the path in the message (NotFound, PermissionDenied or InvalidArgument).
  // Unavailable when an address cannot be bound or another process answers on the admin socket.
  // Logs each bound address ("control listening on ...", "health listening on ...") so that
  // operators and tests can find port-0 listeners.
  [[nodiscard]] static Result<std::unique_ptr<ControlServer>> start(
      const ControlServerOptions& options, NodeInfo node);
  ~ControlServer();  // shutdown()

  // The statuses Health reports; the caller sets them (any thread).
  HealthBoard& health() { return board_; }
  int controlPort() const { return controlPort_; }  // 0 when listen is off
  int healthPort() const { return healthPort_; }    // 0 when health_listen is off

  // Ends every Watch (after it sends what it owes), stops accepting on the admin socket and
  // removes it, then stops both servers (RPCs under way get a second to finish). Idempotent; any thread but a gRPC callback.
  void shutdown();

 private:
  ControlServer(NodeInfo node, ControlSources sources);

  // Destroyed in reverse: the admin listener (it hands connections to the control server), the
  // servers, then the services, the board and the registry they borrow.
  std::shared_ptr<CallerRegistry> callers_;  // shared with control_ and the admin listener
  HealthBoard board_;
  HealthService health_;
  ControlService control_;
  std::unique_ptr<grpc::Server> controlServer_;
  std::unique_ptr<grpc::Server> healthServer_;
  std::unique_ptr<AdminListener> adminListener_;
  int controlPort_ = 0;
  int healthPort_ = 0;
};

}  // namespace hc::control
