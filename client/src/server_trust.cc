#include "client/src/server_trust.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace hc::client {
namespace {

std::string refusal(const std::string& path) { return "refusing the daemon at " + path + ": "; }

// The path with every symlink resolved; "" when it cannot be (the check then stays with the
// folder as named, which connect(2) has just gone through).
std::string resolved(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : std::string();
}

}  // namespace

Status checkServerUid(const std::string& path, uid_t serverUid, const TrustedUsers& trusted) {
  if (trusted.trusts(serverUid)) return okStatus();
  return Status{Code::PermissionDenied, refusal(path) + "served by uid " +
                                            std::to_string(serverUid) + ", expected " +
                                            trusted.describe()};
}

Status checkSocketFolders(const std::string& path, const TrustedUsers& trusted) {
  std::string folders[2] = {parentFolder(path), std::string()};
  if (const std::string real = resolved(path); !real.empty() && parentFolder(real) != folders[0]) {
    folders[1] = parentFolder(real);
  }
  for (const std::string& folder : folders) {
    if (folder.empty()) continue;
    auto st = statFolder(folder);
    if (!st.isOk()) {
      return Status{Code::PermissionDenied,
                    refusal(path) + "cannot check its folder: " + st.status().message()};
    }
    if (std::string problem = socketFolderProblem(*st, trusted); !problem.empty()) {
      return Status{Code::PermissionDenied, refusal(path) + "its folder " + folder + " " + problem};
    }
  }
  return okStatus();
}

Status checkSegmentFd(int fd, uint64_t bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return systemError("fstat of the daemon's segment", errno);
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < bytes) {
    return Status{Code::Internal, "the daemon's segment is " + std::to_string(st.st_size) +
                                      " bytes, not the " + std::to_string(bytes) + " it announced"};
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Status{Code::Internal, "the daemon's segment is not sealed against shrinking"};
  }
  return okStatus();
}

Status checkServer(int socket, const std::string& path) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return systemError("SO_PEERCRED of the daemon at " + path, errno);
  }
  const TrustedUsers trusted = TrustedUsers::ofThisProcess();
  HC_RETURN_IF_ERROR(checkServerUid(path, cred.uid, trusted));
  return checkSocketFolders(path, trusted);
}

}  // namespace hc::client
