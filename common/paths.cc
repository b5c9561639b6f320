#include "common/paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace hc {
namespace {

// The home folder the user database gives this process's effective user; "" when it has none,
// or names one that does not exist (system users such as nobody have "/nonexistent").
std::string homeFromUserDatabase() {
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr || pw.pw_dir == nullptr || pw.pw_dir[0] != '/' ||
      ::access(pw.pw_dir, F_OK) != 0) {
    return {};
  }
  return pw.pw_dir;
}

}  // namespace

std::string defaultSocketPath() {
  if (const char* s = std::getenv("HC_SOCKET"); s != nullptr && *s != '\0') return s;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR");
      ::geteuid() != 0 && x != nullptr && *x != '\0') {
    return std::string(x) + "/hetero-comm/hetero-commd.sock";
  }
  // Never a folder under /tmp: there anyone can create the predictable name first and serve it.
  return std::string(kSystemSocketPath);
}

std::string adminSocketPathFor(const std::string& clientSocket) {
  const size_t slash = clientSocket.rfind('/');
  const size_t nameStart = slash == std::string::npos ? 0 : slash + 1;
  std::string stem = clientSocket;
  if (stem.size() > nameStart + 5 && stem.ends_with(".sock")) stem.resize(stem.size() - 5);
  return stem + "-admin.sock";
}

std::string defaultStateDir() {
  if (const char* s = std::getenv("STATE_DIRECTORY"); s != nullptr && *s != '\0') {
    const std::string all = s;  // colon-separated when the unit names several
    return all.substr(0, all.find(':'));
  }
  if (::geteuid() == 0) return std::string(kSystemStateDir);
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/hetero-comm";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.local/state/hetero-comm";
  }
  // The user's own home, never a shared folder such as /tmp: flight records name jobs and hosts.
  const std::string home = homeFromUserDatabase();
  return home.empty() ? std::string() : home + "/.local/state/hetero-comm";
}

}  // namespace hc
