// Who may serve a client socket, and which folders such a socket may live in. The client checks
// the daemon it reached against these rules before it sends anything (client/src/server_trust.h);
// the daemon checks its own folder with the same rules before it binds (daemon/server/listener.cc,
// daemon/control/control_server.cc), so it never serves from a folder its clients would refuse.
// Depends on common/status.h and libc.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"

namespace hc {

// The system user the packaged daemon runs as, and the group whose members may use it (DESIGN.md
// glossary; systemd/sysusers.d).
inline constexpr char kServiceAccount[] = "hetero-comm";

// The uids a process trusts to serve its socket: root (systemd listens as root under socket
// activation, and root can read any process's memory anyway), the hetero-comm service user when
// this machine has one, and the process's own effective uid (a daemon a user runs for herself).
// Another ordinary user is never trusted: whoever serves the socket receives every buffer and
// IPC handle the client passes.
struct TrustedUsers {
  uid_t self = 0;
  std::optional<uid_t> serviceUid;  // absent when the user database has no hetero-comm user
  std::optional<gid_t> serviceGid;  // absent when it has no hetero-comm group

  // geteuid() and the hetero-comm user and group as the user database names them now (NSS: this
  // may read files or ask a directory service, so call it once per connection, not per call).
  static TrustedUsers ofThisProcess();

  bool trusts(uid_t uid) const;
  // "root, hetero-comm (uid 998) or this process's uid 1000"; the service user is named
  // "hetero-comm (no such user here)" when absent, so a refusal says why it did not count.
  std::string describe() const;
};

// The owner, group and mode of a folder, as stat(2) reports them.
struct FolderStat {
  uid_t owner = 0;
  gid_t group = 0;
  mode_t mode = 0;  // st_mode: type and permission bits
};

// Why a socket must not live in this folder, worded to follow "its folder <path> " ("is writable
// by others (mode 1777)"); "" when it may. The rule:
// - the owner is trusted: an owner can replace the socket with one of its own;
// - others (o+w) may not write, sticky bit or not: in a shared folder anyone can take a
//   predictable name before the daemon starts, and nobody can tell a squatter from a leftover;
// - the group may write only when it is the hetero-comm group: its members are the daemon's
//   users, whom an administrator chose; any other group-writable folder is as shared as /tmp.
// A replaced socket is still caught by the uid check of whoever serves it; the folder rule keeps
// the path itself from being taken, or pointed (symlink) at some other trusted-uid service.
std::string socketFolderProblem(const FolderStat& folder, const TrustedUsers& trusted);

// For a process about to bind a socket at socketPath: PermissionDenied when the folder breaks
// socketFolderProblem's rule for this process (its euid as "self"), so that a daemon refuses at
// startup a folder its clients would refuse at connect: "refusing to serve <path>: its folder
// <folder> is writable by others (mode 0777) (...)".
Status checkFolderToServe(const std::string& socketPath);

// The folder part of a socket path: "/run/hc" for "/run/hc/x.sock", "/" for "/x.sock", "." for
// "x.sock".
std::string parentFolder(const std::string& path);

// stat(2) of folder, with the errno worded as an hc::Status on failure.
Result<FolderStat> statFolder(const std::string& folder);

// Sets the process's umask for one scope and restores the previous one: a socket gets its mode
// from the umask at bind(2) (chmod afterwards leaves a moment when it is wider, and fchmod on the
// descriptor does not reach the file). The umask is per process: only for startup code, while no
// other thread creates files.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t previous_;
};

}  // namespace hc
