// Who calls the Control service, and which of the daemon's tenants that caller may see.
//
// The admin socket is shared by every user of the daemon, so a listing must not show one job's
// pids, uids, keys and flight records to another. A caller on the admin socket is known by its
// SO_PEERCRED (AdminListener accepts the connections itself and remembers each one here, because
// gRPC gives a server no peer credentials on a Unix socket); it sees the clients of its own uid
// and the communicators they hold ranks of. Root and members of group hetero-comm-admin see
// everything. A TCP caller is known only when mutual TLS verified its certificate (the operator
// who holds one the client CA signed sees everything); any other caller sees nothing of anyone.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/observe/status_board.h"

namespace hc::control {

// The group whose members see every job through the admin socket (DESIGN.md, glossary).
inline constexpr const char* kAdminGroup = "hetero-comm-admin";

class Caller {
 public:
  static Caller unknown() { return Caller(Kind::Unknown, 0); }
  static Caller tenant(uid_t uid) { return Caller(Kind::Tenant, uid); }
  static Caller admin(uid_t uid) { return Caller(Kind::Admin, uid); }

  bool seesEverything() const { return kind_ == Kind::Admin; }
  bool sees(uid_t owner) const {
    return kind_ == Kind::Admin || (kind_ == Kind::Tenant && owner == uid_);
  }
  // A communicator is the caller's when one of its owners (the uids that held its ranks) is.
  bool seesAny(const std::set<uid_t>& owners) const;
  // "uid 1000", "uid 0 (admin)", "unknown caller": for logs.
  std::string describe() const;

 private:
  enum class Kind { Unknown, Tenant, Admin };
  Caller(Kind kind, uid_t uid) : kind_(kind), uid_(uid) {}
  Kind kind_;
  uid_t uid_;
};

// What the kernel tells about the process at the other end of a Unix socket.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (SO_PEERGROUPS)
};

// Root, or a member of `adminGid` (primary or supplementary), is an admin; anyone else a tenant.
// No admin group on the system (nullopt): root alone.
Caller callerOf(const PeerCredentials& peer, std::optional<gid_t> adminGid);

// The credentials of the process at the other end of Unix socket `fd`, or why not.
[[nodiscard]] Result<PeerCredentials> peerCredentials(int fd);

// The gid of group `name`, nullopt when the system has no such group.
std::optional<gid_t> groupId(const std::string& name);

// The callers of the admin socket's connections, by the peer string gRPC reports for a channel
// made from a file descriptor ("fd:N"). Any thread.
//
// fd numbers are reused: a connection's entry stays until the next connection that gets its
// number replaces it. A call still being handled when its connection closed and its number went
// to a newer caller could read the newer caller's entry, but its answer has no connection left to
// go out on, so nothing leaks.
class CallerRegistry {
 public:
  void remember(int fd, Caller caller);
  // The caller of a channel `peer` names; unknown for any peer string that is not "fd:N" or an fd
  // never remembered.
  Caller lookup(std::string_view peer) const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<int, Caller> callers_;
};

// What `caller` may see of the board: the clients of the uids it sees.
std::vector<observe::ClientInfo> visibleClients(std::vector<observe::ClientInfo> clients,
                                                const Caller& caller);

}  // namespace hc::control
