// Whoever serves the client socket receives every buffer and IPC handle this process hands it,
// so the client checks, right after connect and before its first frame, who that is: the uid the
// kernel recorded when the server called listen(2) (SO_PEERCRED), and the folder the socket lives
// in (common/socket_trust.h says which owners and modes pass, and why).
// Depends on hc_common only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/socket_trust.h"
#include "common/status.h"

namespace hc::client {

// PermissionDenied unless serverUid is trusted: "refusing the daemon at <path>: served by uid
// 1234, expected root, hetero-comm (uid 998) or this process's uid 1000".
Status checkServerUid(const std::string& path, uid_t serverUid, const TrustedUsers& trusted);

// PermissionDenied when a folder the socket at `path` depends on breaks socketFolderProblem's
// rule: the folder of the path as named and, when the path goes through symlinks, the folder
// where the socket really is.
Status checkSocketFolders(const std::string& path, const TrustedUsers& trusted);

// Both checks for `socket`, connected to `path`, with this process's trusted users.
Status checkServer(int socket, const std::string& path);

// The segment the Welcome hands over, before it is mapped: a memfd at least `bytes` long,
// sealed against shrinking. An unsealed file could be cut short under the mapping later, and
// every access past its end would kill this process with SIGBUS.
Status checkSegmentFd(int fd, uint64_t bytes);

}  // namespace hc::client
