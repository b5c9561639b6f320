#include "daemon/session/process_memory.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace hc::session {
namespace {

std::string yamaScope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  std::string v;
  if (!(f >> v)) return "";
  return v;
}

Status permissionDenied(const char* call) {
  std::string why = std::string(call) + " was refused by the kernel";
  std::string scope = yamaScope();
  if (!scope.empty()) why += " (Yama ptrace_scope=" + scope + ")";
  why += ": the daemon needs ptrace rights over the client (CAP_SYS_PTRACE, or the same uid, a "
         "dumpable client without capabilities the daemon lacks, and Yama ptrace_scope 0); the "
         "client copies through its segment instead";
  return Status{Code::PermissionDenied, why};
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Result<std::unique_ptr<ProcessMemory>> ProcessMemory::attach(pid_t pid, uint64_t address,
                                                             std::span<const uint8_t> pattern) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return systemError("pidfd_open", errno);
  std::unique_ptr<ProcessMemory> pm(new ProcessMemory(pid, UniqueFd(fd)));
  std::vector<uint8_t> seen(pattern.size());
  Status s = pm->read(address, seen.data(), seen.size());
  if (!s.isOk()) return s;
  if (std::memcmp(seen.data(), pattern.data(), pattern.size()) != 0) {
    return invalidArgument("cross-memory attach probe: the pattern read back differs (is the "
                           "address the client's own?)");
  }
  for (auto& b : seen) b = static_cast<uint8_t>(~b);
  HC_RETURN_IF_ERROR(pm->write(address, seen.data(), seen.size()));
  return pm;
}

Status ProcessMemory::alive() const {
  if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), 0, nullptr, 0) == 0) return okStatus();
  return unavailable("client process " + std::to_string(pid_) + " has exited");
}

Status ProcessMemory::read(uint64_t address, void* to, size_t bytes) const {
  return transfer(false, address, to, bytes);
}

Status ProcessMemory::write(uint64_t address, const void* from, size_t bytes) const {
  return transfer(true, address, const_cast<void*>(from), bytes);
}

Status ProcessMemory::transfer(bool toClient, uint64_t address, void* local, size_t bytes) const {
  if (bytes == 0) return okStatus();
  if (address + bytes < address) return invalidArgument("client buffer range wraps around");
  // The pid names this process only while it lives: alive before and after the copy means it
  // lived throughout, so the pid was not recycled in between.
  HC_RETURN_IF_ERROR(alive());
  size_t done = 0;
  while (done < bytes) {
    iovec mine{static_cast<uint8_t*>(local) + done, bytes - done};
    iovec theirs{reinterpret_cast<void*>(address + done), bytes - done};
    ssize_t n = toClient ? ::process_vm_writev(pid_, &mine, 1, &theirs, 1, 0)
                         : ::process_vm_readv(pid_, &mine, 1, &theirs, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    const char* call = toClient ? "process_vm_writev" : "process_vm_readv";
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPERM) return permissionDenied(call);
    if (n < 0 && errno == ESRCH) return alive().isOk() ? systemError(call, errno) : alive();
    if (n == 0 || errno == EFAULT) {
      return invalidArgument(std::string(call) + ": client buffer at " + hex(address + done) +
                             " is not mapped for " +
                             std::to_string(bytes - done) + " bytes");
    }
    return systemError(call, errno);
  }
  return alive();
}

}  // namespace hc::session
