// ProcessMemory: a client's own memory, read and written by the daemon through the kernel
// (process_vm_readv / process_vm_writev), the opt-in cross-memory-attach path. Bound to the
// client process by a pidfd, so a recycled pid can never redirect an access to another process.
// Runs on the IPC thread; the object is immutable after attach(), so pool threads may use it too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::session {

class ProcessMemory {
 public:
  // Proves that the daemon may access pid's memory: reads `pattern` back from `address` and
  // writes its bitwise complement there (the client checks it). PermissionDenied, with the
  // reason (Yama ptrace scope, missing capability), when the kernel refuses.
  static Result<std::unique_ptr<ProcessMemory>> attach(pid_t pid, uint64_t address,
                                                       std::span<const uint8_t> pattern);

  // Copies bytes between the client's address space and daemon memory. InvalidArgument when the
  // client range is not mapped; Unavailable when the process has exited.
  [[nodiscard]] Status read(uint64_t address, void* to, size_t bytes) const;
  [[nodiscard]] Status write(uint64_t address, const void* from, size_t bytes) const;

  pid_t pid() const { return pid_; }

 private:
  ProcessMemory(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  Status alive() const;
  Status transfer(bool toClient, uint64_t address, void* local, size_t bytes) const;

  pid_t pid_;
  UniqueFd pidfd_;
};

}  // namespace hc::session
