#include "common/socket_trust.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

namespace hc {
namespace {

// getpwnam_r / getgrnam_r, not the plain calls: the client runs inside multithreaded training
// processes, and the plain calls share one static buffer. ERANGE means "a bigger buffer".
template <typename Entry, typename Lookup>
bool lookUp(const char* name, Entry* entry, Lookup lookup) {
  std::vector<char> buffer(4096);
  for (;;) {
    Entry* found = nullptr;
    const int err = lookup(name, entry, buffer.data(), buffer.size(), &found);
    if (err == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return err == 0 && found != nullptr;
  }
}

std::string octalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

TrustedUsers TrustedUsers::ofThisProcess() {
  TrustedUsers t;
  t.self = ::geteuid();
  passwd pw{};
  if (lookUp(kServiceAccount, &pw, ::getpwnam_r)) t.serviceUid = pw.pw_uid;
  group gr{};
  if (lookUp(kServiceAccount, &gr, ::getgrnam_r)) t.serviceGid = gr.gr_gid;
  return t;
}

bool TrustedUsers::trusts(uid_t uid) const {
  return uid == 0 || uid == self || (serviceUid && uid == *serviceUid);
}

std::string TrustedUsers::describe() const {
  std::string service = kServiceAccount;
  service += serviceUid ? " (uid " + std::to_string(*serviceUid) + ")" : " (no such user here)";
  return "root, " + service + " or this process's uid " + std::to_string(self);
}

std::string socketFolderProblem(const FolderStat& folder, const TrustedUsers& trusted) {
  if (!S_ISDIR(folder.mode)) return "is not a folder";
  if (!trusted.trusts(folder.owner)) {
    return "is owned by uid " + std::to_string(folder.owner) + ", expected " + trusted.describe();
  }
  if ((folder.mode & S_IWOTH) != 0) {
    return "is writable by others (mode " + octalMode(folder.mode) + ")";
  }
  if ((folder.mode & S_IWGRP) != 0 &&
      !(trusted.serviceGid && folder.group == *trusted.serviceGid)) {
    std::string service = kServiceAccount;
    service += trusted.serviceGid ? " (gid " + std::to_string(*trusted.serviceGid) + ")"
                                  : " (no such group here)";
    return "is writable by its group, gid " + std::to_string(folder.group) + " (mode " +
           octalMode(folder.mode) + "), which is not " + service;
  }
  return {};
}

Status checkFolderToServe(const std::string& socketPath) {
  const std::string folder = parentFolder(socketPath);
  auto st = statFolder(folder);
  if (!st.isOk()) return st.status();
  std::string problem = socketFolderProblem(*st, TrustedUsers::ofThisProcess());
  if (problem.empty()) return okStatus();
  return Status{Code::PermissionDenied,
                "refusing to serve " + socketPath + ": its folder " + folder + " " + problem +
                    " (clients would refuse it; use a folder of this user that others cannot "
                    "write)"};
}

std::string parentFolder(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Result<FolderStat> statFolder(const std::string& folder) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) return systemError("stat " + folder, errno);
  return FolderStat{st.st_uid, st.st_gid, st.st_mode};
}

}  // namespace hc
