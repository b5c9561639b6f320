#include "common/paths.h"

#include <unistd.h>

#include <cstdlib>

namespace hc {

std::string defaultSocketPath() {
  if (const char* s = std::getenv("HC_SOCKET"); s != nullptr && *s != '\0') return s;
  if (::geteuid() == 0) return "/run/hetero-comm/hetero-commd.sock";
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') {
    return std::string(x) + "/hetero-comm/hetero-commd.sock";
  }
  return "/tmp/hetero-comm-" + std::to_string(::getuid()) + "/hetero-commd.sock";
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
  if (::geteuid() == 0) return "/var/lib/hetero-comm";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/hetero-comm";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.local/state/hetero-comm";
  }
  return "/tmp/hetero-comm-" + std::to_string(::getuid()) + "/state";
}

}  // namespace hc
