// A memfd of a given size mapped shared: how the device tests and the fake GPU runtimes stand in
// for device memory that crosses processes as an fd (a VMM allocation's POSIX fd). Header-only,
// so the fake runtimes (modules loaded by path) use it as the tests do. Depends on libc only.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace hc::device::testing {

// Owns the fd and the mapping; neither copyable nor movable. fd() is -1 and view() null when the
// kernel refused either.
class MemfdAllocation {
 public:
  explicit MemfdAllocation(size_t bytes, const char* name = "hc-device-test") : bytes_(bytes) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(bytes)) == 0) {
      void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      view_ = at == MAP_FAILED ? nullptr : static_cast<uint8_t*>(at);
    }
  }
  ~MemfdAllocation() {
    if (view_ != nullptr) ::munmap(view_, bytes_);
    if (fd_ >= 0) ::close(fd_);
  }
  MemfdAllocation(const MemfdAllocation&) = delete;
  MemfdAllocation& operator=(const MemfdAllocation&) = delete;

  int fd() const { return fd_; }
  uint8_t* view() const { return view_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  int fd_ = -1;
  uint8_t* view_ = nullptr;
};

}  // namespace hc::device::testing
