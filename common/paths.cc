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

}  // namespace hc
