#include "daemon/control/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"

namespace hc::control {
namespace {

constexpr auto kShutdownGrace = std::chrono::seconds(1);

// A socket file nobody answers on is a leftover of a daemon that died: remove it. One that
// answers belongs to a live process, which we must not take over (gRPC would unlink and rebind).
Status claimSocketPath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return okStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return invalidArgument("control.admin_socket " + path + " exists and is not a socket");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return invalidArgument("admin socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe.valid() &&
      ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return unavailable("another process serves the admin socket " + path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return systemError("unlink " + path, errno);
  return okStatus();
}

void stopServer(std::unique_ptr<grpc::Server>& server) {
  if (!server) return;
  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server->Wait();
  server.reset();
}

}  // namespace

ControlServer::ControlServer(NodeInfo node) : health_(board_), control_(std::move(node)) {}

ControlServer::~ControlServer() { shutdown(); }

Result<std::unique_ptr<ControlServer>> ControlServer::start(const ControlServerOptions& options,
                                                            NodeInfo node) {
  std::unique_ptr<ControlServer> s(new ControlServer(std::move(node)));
  if (!options.adminSocket.empty() || !options.listen.empty()) {
    grpc::ServerBuilder builder;
    // gRPC turns SO_REUSEPORT on by default: two daemons could then share a port silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    if (!options.adminSocket.empty()) {
      HC_RETURN_IF_ERROR(claimSocketPath(options.adminSocket));
      builder.AddListeningPort("unix:" + options.adminSocket, grpc::InsecureServerCredentials());
    }
    if (!options.listen.empty()) {
      builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                               &s->controlPort_);
    }
    builder.RegisterService(&s->health_);
    builder.RegisterService(&s->control_);
    s->controlServer_ = builder.BuildAndStart();
    if (s->controlServer_ == nullptr || (!options.listen.empty() && s->controlPort_ == 0)) {
      s->controlServer_.reset();
      return unavailable("cannot start the control server on " +
                         (options.adminSocket.empty() ? options.listen : options.adminSocket) +
                         (options.listen.empty() || options.adminSocket.empty()
                              ? std::string()
                              : " and " + options.listen));
    }
    if (!options.adminSocket.empty()) {
      s->adminSocket_ = options.adminSocket;
      // Owner and group only: the admin socket tells a lot about the node.
      ::chmod(options.adminSocket.c_str(), 0660);
      spdlog::info("control listening on unix:{}", options.adminSocket);
    }
    if (!options.listen.empty()) {
      const std::string host = options.listen.substr(0, options.listen.rfind(':'));
      spdlog::info("control listening on {}:{}", host, s->controlPort_);
    }
  }
  if (!options.healthListen.empty()) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(options.healthListen, grpc::InsecureServerCredentials(),
                             &s->healthPort_);
    builder.RegisterService(&s->health_);
    s->healthServer_ = builder.BuildAndStart();
    if (s->healthServer_ == nullptr || s->healthPort_ == 0) {
      s->healthServer_.reset();
      return unavailable("cannot listen for health checks on " + options.healthListen);
    }
    const std::string host = options.healthListen.substr(0, options.healthListen.rfind(':'));
    spdlog::info("health listening on {}:{}", host, s->healthPort_);
  }
  return s;
}

void ControlServer::shutdown() {
  // Watches first: a Watch is a call that never ends on its own, and Shutdown would otherwise
  // wait for it until the grace period runs out.
  board_.close();
  stopServer(controlServer_);
  stopServer(healthServer_);
  if (!adminSocket_.empty()) {
    ::unlink(adminSocket_.c_str());
    adminSocket_.clear();
  }
}

}  // namespace hc::control
