#include "bench/daemon_cpu.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/unique_fd.h"

namespace hc::bench {

pid_t daemonPid(const std::string& path, std::string* error) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path '" + path + "' is empty or too long";
    return -1;
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));  // the daemon's socket type
  if (!fd.valid()) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = "connect " + path + ": " + std::strerror(errno);
    return -1;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *error = std::string("SO_PEERCRED: ") + std::strerror(errno);
    return -1;
  }
  return cred.pid;
}

double cpuSecondsFromStat(const std::string& stat, long ticksPerSecond) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || ticksPerSecond <= 0) return -1;
  // After the name: field 3 (state) ... field 14 (utime), field 15 (stime).
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  for (int n = 3; n <= 15; ++n) {
    if (!(fields >> field)) return -1;
    if (n < 14) continue;
    char* end = nullptr;
    unsigned long long v = std::strtoull(field.c_str(), &end, 10);
    if (end == field.c_str() || *end != '\0') return -1;
    (n == 14 ? utime : stime) = v;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(ticksPerSecond);
}

double processCpuSeconds(pid_t pid) {
  if (pid <= 0) return -1;
  clockid_t clock;
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) == 0 && ::clock_gettime(clock, &ts) == 0) {
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return cpuSecondsFromStat(stat, ::sysconf(_SC_CLK_TCK));
}

}  // namespace hc::bench
