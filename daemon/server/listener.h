// The client socket: bound here (SOCK_SEQPACKET, born mode 0660 under a umask, group
// socket_group, in a folder its clients will accept), or taken from systemd socket activation; and
// the SO_PEERCRED / SO_PEERGROUPS check of each connecting peer.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/session/session.h"

namespace hc::server {

// Binds path (creating its folder, mode 0755), unless systemd passed a listening socket.
// PermissionDenied when the folder is one the clients would refuse (common/socket_trust.h: owned
// by an untrusted uid, writable by others, or by a group other than hetero-comm); a socket from
// systemd is not checked, since systemd chose its folder. `ownsPath` tells whether the daemon
// created the file and so removes it on exit.
Result<UniqueFd> openClientSocket(const std::string& path, const std::string& group,
                                  bool* ownsPath);

struct AccessPolicy {
  std::vector<uid_t> uids;  // always includes the daemon's uid and root
  std::vector<gid_t> gids;  // resolved from allow_groups; unknown group names are skipped
  std::string describe() const;
};
AccessPolicy makeAccessPolicy(const std::vector<uint32_t>& uids,
                              const std::vector<std::string>& groups);

// Reads the peer's credentials and checks them against the policy.
Result<session::PeerIdentity> checkPeer(int fd, const AccessPolicy& policy);

}  // namespace hc::server
