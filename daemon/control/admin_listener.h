// AdminListener: the admin Unix socket, accepted by the daemon itself. gRPC C++ gives a server no
// peer credentials on a Unix socket, so instead of letting gRPC listen on the path, this thread
// accepts each connection, reads SO_PEERCRED (and SO_PEERGROUPS), remembers the caller in a
// CallerRegistry under the fd, and only then hands the fd to the gRPC server
// (grpc::AddInsecureChannelFromFd): every call on that connection is answered for that caller.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/control/caller.h"

namespace hc::control {

class AdminListener {
 public:
  // Binds `path` (born 0660 under a umask: owner and group only; startup code, no other thread
  // creates files meanwhile), listens, and starts the accept thread. `server` (borrowed: started,
  // outlives this) serves the connections; `callers` (shared with the Control service) learns
  // who is on each. The admin group is looked up once, here, on the starting thread: a group
  // lookup may go through NSS modules (nss-systemd talks to userdb over sockets) that are not
  // safe beside the daemon's other threads, so a group created later counts after a restart.
  // Unavailable when the path cannot be bound.
  [[nodiscard]] static Result<std::unique_ptr<AdminListener>> start(
      const std::string& path, grpc::Server* server, std::shared_ptr<CallerRegistry> callers);
  ~AdminListener();  // stop()

  // Stops accepting and removes the socket file; connections already handed over stay with the
  // server, which ends them at its Shutdown. Idempotent; not from the accept thread.
  void stop();

 private:
  AdminListener(std::string path, UniqueFd listenFd, UniqueFd wakeFd, grpc::Server* server,
                std::shared_ptr<CallerRegistry> callers, std::optional<gid_t> adminGid);
  void run();
  void handOver(UniqueFd connection);

  const std::string path_;
  UniqueFd listenFd_;
  UniqueFd wakeFd_;  // eventfd: stop() wakes the accept thread through it
  grpc::Server* server_;
  std::shared_ptr<CallerRegistry> callers_;
  const std::optional<gid_t> adminGid_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace hc::control
