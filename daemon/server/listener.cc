#include "daemon/server/listener.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <cerrno>

#include <spdlog/spdlog.h>

#include "common/seqpacket.h"
#include "common/socket_trust.h"

namespace hc::server {
namespace {

// Creates the socket's folder when it is missing, then checks it as clients will.
Status prepareSocketFolder(const std::string& path) {
  const std::string folder = parentFolder(path);
  std::error_code ec;
  if (!std::filesystem::exists(folder, ec)) {
    // 0755: clients of other uids must reach the socket; the socket's own mode decides who may
    // connect.
    ScopedUmask mask(0022);
    std::filesystem::create_directories(folder, ec);
    if (ec) {
      return Status{Code::PermissionDenied,
                    "create " + folder + ": " + ec.message() + " (name the socket with --socket)"};
    }
  }
  return checkFolderToServe(path);
}

}  // namespace

Result<UniqueFd> openClientSocket(const std::string& path, const std::string& group,
                                  bool* ownsPath) {
  *ownsPath = false;
  int passed = sd_listen_fds(1);
  if (passed > 0) {
    int fd = SD_LISTEN_FDS_START;
    if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, nullptr, 0) > 0) {
      // systemd passes it blocking; the IPC loop accepts until EAGAIN and must never block there.
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        return systemError("making the passed client socket non-blocking", errno);
      }
      spdlog::info("using the client socket passed by systemd");
      return UniqueFd(fd);
    }
    spdlog::warn("systemd passed {} descriptors but none is a listening SEQPACKET socket", passed);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return invalidArgument("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  HC_RETURN_IF_ERROR(prepareSocketFolder(path));
  // A live daemon answers on the path: refuse to steal it. A stale file is removed.
  if (connectSeqpacket(path).isOk()) {
    return Status{Code::Unavailable, "another hetero-commd is serving " + path};
  }
  ::unlink(path.c_str());

  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return systemError("socket", errno);
  {
    // Born 0660: bind(2) takes the socket file's mode from the umask. A chmod by path afterwards
    // would leave the file as wide as the inherited umask made it until then, and would change
    // whatever the path named by the time it ran.
    ScopedUmask mask(0117);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return systemError("bind " + path, errno);
    }
  }
  *ownsPath = true;
  if (!group.empty()) {
    if (struct group* g = ::getgrnam(group.c_str()); g != nullptr) {
      if (::chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
        spdlog::warn("cannot give {} to group {}: {}", path, group, std::strerror(errno));
      }
    }
  }
  if (::listen(fd.get(), 128) != 0) return systemError("listen " + path, errno);
  return fd;
}

std::string AccessPolicy::describe() const {
  std::string s = "uids";
  for (uid_t u : uids) s += " " + std::to_string(u);
  s += ", gids";
  for (gid_t g : gids) s += " " + std::to_string(g);
  return s;
}

AccessPolicy makeAccessPolicy(const std::vector<uint32_t>& uids,
                              const std::vector<std::string>& groups) {
  AccessPolicy p;
  p.uids = {::geteuid(), 0};
  for (uint32_t u : uids) p.uids.push_back(u);
  for (const auto& name : groups) {
    if (struct group* g = ::getgrnam(name.c_str()); g != nullptr) {
      p.gids.push_back(g->gr_gid);
    } else {
      spdlog::debug("allow_groups: group '{}' does not exist here", name);
    }
  }
  return p;
}

Result<session::PeerIdentity> checkPeer(int fd, const AccessPolicy& policy) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return systemError("SO_PEERCRED", errno);
  }
  session::PeerIdentity id{cred.pid, cred.uid, cred.gid};
  auto allowed = [&](gid_t g) {
    return std::find(policy.gids.begin(), policy.gids.end(), g) != policy.gids.end();
  };
  if (std::find(policy.uids.begin(), policy.uids.end(), cred.uid) != policy.uids.end() ||
      allowed(cred.gid)) {
    return id;
  }
  gid_t groups[256];
  socklen_t glen = sizeof(groups);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
    for (size_t i = 0; i < glen / sizeof(gid_t); ++i) {
      if (allowed(groups[i])) return id;
    }
  }
  return Status{Code::PermissionDenied, "uid " + std::to_string(cred.uid) + " (pid " +
                                            std::to_string(cred.pid) +
                                            ") may not use this hetero-commd (allowed: " +
                                            policy.describe() + ")"};
}

}  // namespace hc::server
