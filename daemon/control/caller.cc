#include "daemon/control/caller.h"

#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace hc::control {

bool Caller::seesAny(const std::set<uid_t>& owners) const {
  if (kind_ == Kind::Admin) return true;
  return kind_ == Kind::Tenant && owners.count(uid_) != 0;
}

std::string Caller::describe() const {
  switch (kind_) {
    case Kind::Unknown:
      return "unknown caller";
    case Kind::Tenant:
      return "uid " + std::to_string(uid_);
    case Kind::Admin:
      break;
  }
  return "uid " + std::to_string(uid_) + " (admin)";
}

Caller callerOf(const PeerCredentials& peer, std::optional<gid_t> adminGid) {
  if (peer.uid == 0) return Caller::admin(0);
  if (adminGid && (peer.gid == *adminGid || std::find(peer.groups.begin(), peer.groups.end(),
                                                      *adminGid) != peer.groups.end())) {
    return Caller::admin(peer.uid);
  }
  return Caller::tenant(peer.uid);
}

Result<PeerCredentials> peerCredentials(int fd) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return systemError("SO_PEERCRED", errno);
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  // The groups the peer had when it connected. A kernel without SO_PEERGROUPS (before 4.13)
  // leaves the list empty: such a caller is an admin only by its primary group.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) == 0) {
      groups.resize(length / sizeof(gid_t));
      peer.groups = std::move(groups);
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(length / sizeof(gid_t) + 1);
  }
  return peer;
}

std::optional<gid_t> groupId(const std::string& name) {
  long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 16384);
  for (;;) {
    group entry{};
    group* found = nullptr;
    const int e = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (e == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (e != 0 || found == nullptr) return std::nullopt;
    return found->gr_gid;
  }
}

void CallerRegistry::remember(int fd, Caller caller) {
  std::lock_guard lock(mutex_);
  callers_.insert_or_assign(fd, caller);
}

Caller CallerRegistry::lookup(std::string_view peer) const {
  constexpr std::string_view kPrefix = "fd:";
  if (!peer.starts_with(kPrefix)) return Caller::unknown();
  peer.remove_prefix(kPrefix.size());
  int fd = -1;
  const auto [end, error] = std::from_chars(peer.data(), peer.data() + peer.size(), fd);
  if (error != std::errc() || end != peer.data() + peer.size()) return Caller::unknown();
  std::lock_guard lock(mutex_);
  auto it = callers_.find(fd);
  return it == callers_.end() ? Caller::unknown() : it->second;
}

std::vector<observe::ClientInfo> visibleClients(std::vector<observe::ClientInfo> clients,
                                                const Caller& caller) {
  std::erase_if(clients, [&](const observe::ClientInfo& c) { return !caller.sees(c.uid); });
  return clients;
}

}  // namespace hc::control
