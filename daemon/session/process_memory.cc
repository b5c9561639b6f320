#include "daemon/session/process_memory.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace hc::session {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status notMemFile(const std::string& what) {
  return invalidArgument("cross-memory attach probe: the descriptor " + what +
                         "; the client must send its /proc/self/mem, opened O_RDWR");
}

// The descriptor comes from the client, and the daemon will write into it. Anything but a
// process's mem file is refused before the first access: another /proc file may check the
// writer's credentials at write time (the daemon's, not the client's), and a file of another
// file system (FUSE, a pipe) could block the IPC thread or mean something else entirely.
// /proc/<pid>/mem is the only regular file of /proc with mode 0600 named "mem", and /proc
// refuses chmod, so the three checks together name it.
Status checkMemFile(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return systemError("fstatfs of the probe's descriptor", errno);
  if (fs.f_type != PROC_SUPER_MAGIC) return notMemFile("is not a file of /proc");
  struct stat st {};
  if (::fstat(fd, &st) != 0) return systemError("fstat of the probe's descriptor", errno);
  if (!S_ISREG(st.st_mode) || (st.st_mode & 07777) != (S_IRUSR | S_IWUSR)) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return notMemFile(std::string("is a file of /proc, but not a process's mem file (mode ") +
                      mode + ")");
  }
  char link[PATH_MAX];
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(self.c_str(), link, sizeof(link) - 1);
  if (n < 0) return systemError("readlink " + self, errno);
  const std::string_view name(link, static_cast<size_t>(n));
  if (!name.ends_with("/mem")) return notMemFile("is " + std::string(name) + ", not a mem file");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return systemError("fcntl(F_GETFL) of the probe's descriptor", errno);
  if ((flags & O_ACCMODE) != O_RDWR) return notMemFile("is not open for reading and writing");
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<ProcessMemory>> ProcessMemory::attach(UniqueFd memFd, pid_t pid,
                                                             uint64_t address,
                                                             std::span<const uint8_t> pattern) {
  HC_RETURN_IF_ERROR(checkMemFile(memFd.get()));
  std::unique_ptr<ProcessMemory> pm(new ProcessMemory(std::move(memFd), pid));
  // A random pattern the client wrote (cross_memory_attach.cc): reading it back shows that the
  // descriptor reaches the memory of the process that sent it.
  std::vector<uint8_t> seen(pattern.size());
  Status s = pm->read(address, seen.data(), seen.size());
  if (!s.isOk()) return s;
  if (std::memcmp(seen.data(), pattern.data(), pattern.size()) != 0) {
    return invalidArgument(
        "cross-memory attach probe: the pattern read back differs (is the "
        "descriptor the client's own /proc/self/mem?)");
  }
  for (auto& b : seen) b = static_cast<uint8_t>(~b);
  HC_RETURN_IF_ERROR(pm->write(address, seen.data(), seen.size()));
  return pm;
}

Status ProcessMemory::read(uint64_t address, void* to, size_t bytes) const {
  return transfer(false, address, to, bytes);
}

Status ProcessMemory::write(uint64_t address, const void* from, size_t bytes) const {
  return transfer(true, address, const_cast<void*>(from), bytes);
}

Status ProcessMemory::transfer(bool toClient, uint64_t address, void* local, size_t bytes) const {
  if (bytes == 0) return okStatus();
  // pread/pwrite take a signed offset: user addresses are far below 2^63 on every architecture.
  constexpr uint64_t kMaxOffset = static_cast<uint64_t>(INT64_MAX);
  if (address > kMaxOffset || bytes > kMaxOffset - address) {
    return invalidArgument("client buffer at " + hex(address) + " of " + std::to_string(bytes) +
                           " bytes lies outside user addresses");
  }
  // The kernel answers for the address space the file was opened on: 0 bytes once it is gone
  // (no pid is looked up, so a recycled pid or a new program image is never reached), EIO for
  // an address not mapped in it. Pages mapped without permission are reached too (header).
  size_t done = 0;
  while (done < bytes) {
    auto* mine = static_cast<uint8_t*>(local) + done;
    const auto at = static_cast<off_t>(address + done);
    ssize_t n = toClient ? ::pwrite(memFd_.get(), mine, bytes - done, at)
                         : ::pread(memFd_.get(), mine, bytes - done, at);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // Short: it travels in a completion entry (ipc::kCompletionText).
      return unavailable("client memory is gone: pid " + std::to_string(pid_) +
                         " exited or called exec since its cross-memory attach");
    }
    const char* call = toClient ? "pwrite to the client's /proc/self/mem"
                                : "pread from the client's /proc/self/mem";
    if (errno == EIO) {
      return invalidArgument("client buffer at " + hex(address + done) + " is not mapped for " +
                             std::to_string(bytes - done) + " bytes");
    }
    return systemError(call, errno);
  }
  return okStatus();
}

}  // namespace hc::session
