// SimAllocation: one allocation of the simulated device, a sealed memfd mapped MAP_SHARED, so that
// a client process and the daemon see the same bytes the way two processes see one GPU buffer
// through an IPC handle. The fd is what crosses processes (over SCM_RIGHTS).
// Depends on libc and hc_common (status.h, unique_fd.h) only.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::simdev {

// Owns its fd and its mapping; moving transfers both, destruction unmaps and closes.
// Not thread-safe for mutation (move/assign); data() may be used from any thread.
class SimAllocation {
 public:
  // An empty allocation: data() null, bytes() 0, fd() -1. Only useful as a moved-to target.
  SimAllocation() = default;

  // memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING), ftruncate to `bytes`, seal against shrink,
  // grow and further sealing, then mmap shared read/write. The memory reads as zeros.
  // InvalidArgument for bytes == 0; NoResource when the kernel refuses memory or address space.
  // `name` shows up in /proc/<pid>/fd and /proc/<pid>/maps (debugging only).
  [[nodiscard]] static Result<SimAllocation> create(uint64_t bytes, const char* name);

  // Maps an allocation another process exported. Duplicates `fd` (the caller keeps and closes
  // its own). InvalidArgument when fd is not a memfd (checked with F_GET_SEALS), its size
  // (fstat) is not exactly `bytes`, or it lacks the SHRINK and GROW seals: without them a client
  // could shrink the file under the daemon and make it SIGBUS. The message says which check
  // failed.
  [[nodiscard]] static Result<SimAllocation> import(int fd, uint64_t bytes);

  SimAllocation(SimAllocation&& other) noexcept;
  SimAllocation& operator=(SimAllocation&& other) noexcept;
  SimAllocation(const SimAllocation&) = delete;
  SimAllocation& operator=(const SimAllocation&) = delete;
  ~SimAllocation();

  uint8_t* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  // Owned by this allocation: dup() it to hand it on; valid until destruction.
  int fd() const { return fd_.get(); }
  bool valid() const { return data_ != nullptr; }

 private:
  SimAllocation(UniqueFd fd, uint8_t* data, uint64_t bytes);
  void reset();

  UniqueFd fd_;
  uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace hc::simdev
