#include "daemon/control/admin_listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/socket_trust.h"

namespace hc::control {
namespace {

constexpr int kBacklog = 128;

Result<sockaddr_un> unixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return invalidArgument("control.admin_socket " + path + " is too long for a Unix socket");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// A socket file nobody answers on is a leftover of a daemon that died: remove it. One that
// answers belongs to a live process, which we must not take over.
Status claimSocketPath(const std::string& path, const sockaddr_un& addr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return okStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return invalidArgument("control.admin_socket " + path + " exists and is not a socket");
  }
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe.valid() &&
      ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return unavailable("another process serves the admin socket " + path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return systemError("unlink " + path, errno);
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<AdminListener>> AdminListener::start(
    const std::string& path, grpc::Server* server, std::shared_ptr<CallerRegistry> callers) {
  // The admin socket answers hcctl: a folder others control could hand it an impostor.
  HC_RETURN_IF_ERROR(checkFolderToServe(path));
  auto addr = unixAddress(path);
  if (!addr.isOk()) return addr.status();
  HC_RETURN_IF_ERROR(claimSocketPath(path, *addr));
  UniqueFd listenFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listenFd.valid()) return systemError("admin socket", errno);
  {
    // Owner and group only from the moment it exists: a chmod after the fact would leave it as
    // wide as the inherited umask until then.
    ScopedUmask mask(0117);
    if (::bind(listenFd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
      return unavailable("cannot bind the admin socket " + path + ": " + std::strerror(errno));
    }
  }
  if (::listen(listenFd.get(), kBacklog) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return unavailable("cannot listen on the admin socket " + path + ": " + std::strerror(e));
  }
  UniqueFd wakeFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeFd.valid()) {
    const int e = errno;
    ::unlink(path.c_str());
    return systemError("eventfd", e);
  }
  std::unique_ptr<AdminListener> listener(new AdminListener(
      path, std::move(listenFd), std::move(wakeFd), server, std::move(callers),
      groupId(kAdminGroup)));
  listener->thread_ = std::thread([l = listener.get()] { l->run(); });
  return listener;
}

AdminListener::AdminListener(std::string path, UniqueFd listenFd, UniqueFd wakeFd,
                             grpc::Server* server, std::shared_ptr<CallerRegistry> callers,
                             std::optional<gid_t> adminGid)
    : path_(std::move(path)),
      listenFd_(std::move(listenFd)),
      wakeFd_(std::move(wakeFd)),
      server_(server),
      callers_(std::move(callers)),
      adminGid_(adminGid) {}

AdminListener::~AdminListener() { stop(); }

void AdminListener::stop() {
  if (stopped_) return;
  stopped_ = true;
  const uint64_t one = 1;
  if (::write(wakeFd_.get(), &one, sizeof(one)) != sizeof(one)) {
    spdlog::warn("admin socket: cannot wake the accept thread: {}", std::strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
  listenFd_.reset();
  ::unlink(path_.c_str());
}

void AdminListener::run() {
  for (;;) {
    pollfd fds[2] = {{listenFd_.get(), POLLIN, 0}, {wakeFd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("admin socket: poll: {}; no more control connections", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      UniqueFd connection(
          ::accept4(listenFd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!connection.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // EAGAIN: all taken. EMFILE and the like: logged, and the next poll retries; a short
        // sleep keeps a full fd table from turning this loop into a spin.
        if (errno != EAGAIN) {
          spdlog::warn("admin socket: accept: {}", std::strerror(errno));
          ::usleep(100'000);
        }
        break;
      }
      handOver(std::move(connection));
    }
  }
}

void AdminListener::handOver(UniqueFd connection) {
  auto peer = peerCredentials(connection.get());
  if (!peer.isOk()) {
    // Without credentials there is no way to tell whose calls these are: refuse the connection.
    spdlog::warn("admin socket: connection refused: {}", peer.status().toString());
    return;
  }
  const Caller caller = callerOf(*peer, adminGid_);
  spdlog::debug("admin socket: connection of pid {} as {}", peer->pid, caller.describe());
  // Remembered before gRPC sees the fd: no call on it can be answered for anyone else.
  callers_->remember(connection.get(), caller);
  grpc::AddInsecureChannelFromFd(server_, connection.release());
}

}  // namespace hc::control
