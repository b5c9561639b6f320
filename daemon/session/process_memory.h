// ProcessMemory: a client's own memory, read and written by the daemon with pread/pwrite on the
// client's /proc/self/mem, the opt-in cross-memory-attach path. The client opens that file itself
// and passes it with its CmaProbe (protocol.h), so the kernel checked access when the client
// opened it, as the client, and the daemon needs no ptrace rights. The file is bound to the
// address space it was opened on, not to a pid: once the client exits or calls exec, that address
// space is gone and every access fails, so neither a recycled pid nor a program the client
// execs (a setuid one included) can be reached through it.
// Runs on the IPC thread; the object is immutable after attach(), so pool threads may use it too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/staging/operand.h"

namespace hc::session {

class ProcessMemory final : public staging::ClientMemory {
 public:
  // Takes memFd, which the client said is its /proc/self/mem, and proves it: the descriptor must
  // be a process's mem file of /proc, open for reading and writing; `pattern` must read back
  // from `address` through it, and its bitwise complement is written there (the client checks
  // that). InvalidArgument when the descriptor is something else or the pattern differs; pid
  // only names the client in messages.
  static Result<std::unique_ptr<ProcessMemory>> attach(UniqueFd memFd, pid_t pid, uint64_t address,
                                                       std::span<const uint8_t> pattern);

  // Copies bytes between the client's address space and daemon memory. InvalidArgument when the
  // client range is not mapped; Unavailable when the address space is gone (the client exited or
  // called exec). Like the client's own accesses through the file (and unlike process_vm_readv),
  // these reach mapped pages without read or write permission (PROT_NONE guard pages, read-only
  // private mappings, written copy-on-write): nothing the client could not do to itself.
  // staging::ClientMemory
  [[nodiscard]] Status read(uint64_t address, void* to, size_t bytes) const override;
  [[nodiscard]] Status write(uint64_t address, const void* from, size_t bytes) const override;

  pid_t pid() const { return pid_; }

 private:
  ProcessMemory(UniqueFd memFd, pid_t pid) : memFd_(std::move(memFd)), pid_(pid) {}
  Status transfer(bool toClient, uint64_t address, void* local, size_t bytes) const;

  UniqueFd memFd_;
  pid_t pid_;
};

}  // namespace hc::session
