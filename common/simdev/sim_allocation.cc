#include "common/simdev/sim_allocation.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace hc::simdev {
namespace {

// The seals an imported allocation must carry: with either missing, the exporter could change
// the file's size under our mapping (a shrink turns our loads into SIGBUS).
constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW;

Result<uint8_t*> mapShared(int fd, uint64_t bytes, const std::string& what) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return systemError("mmap " + what, errno);
  return static_cast<uint8_t*>(p);
}

}  // namespace

SimAllocation::SimAllocation(UniqueFd fd, uint8_t* data, uint64_t bytes)
    : fd_(std::move(fd)), data_(data), bytes_(bytes) {}

SimAllocation::SimAllocation(SimAllocation&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

SimAllocation& SimAllocation::operator=(SimAllocation&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

SimAllocation::~SimAllocation() { reset(); }

void SimAllocation::reset() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  fd_.reset();
}

Result<SimAllocation> SimAllocation::create(uint64_t bytes, const char* name) {
  if (bytes == 0) return invalidArgument("sim allocation of 0 bytes");
  const std::string label = name != nullptr && *name != '\0' ? name : "hc-sim";
  UniqueFd fd(::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return systemError("memfd_create " + label, errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    // tmpfs reports a full memory cgroup or a size limit as EFBIG/ENOSPC: both mean "no memory".
    int err = errno;
    if (err == EFBIG || err == ENOSPC || err == ENOMEM) {
      return Status(Code::NoResource, "sim allocation of " + std::to_string(bytes) +
                                          " B: " + systemError("ftruncate", err).message());
    }
    return systemError("ftruncate " + label, err);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return systemError("seal " + label, errno);
  }
  auto data = mapShared(fd.get(), bytes, label);
  if (!data) return data.status();
  return SimAllocation(std::move(fd), *data, bytes);
}

Result<SimAllocation> SimAllocation::import(int fd, uint64_t bytes) {
  if (fd < 0) return invalidArgument("sim import: no fd came with the handle");
  if (bytes == 0) return invalidArgument("sim import: size 0");
  // Only files that support sealing (memfds) answer F_GET_SEALS; a regular file, pipe or socket
  // fails with EINVAL.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return invalidArgument("sim import: fd " + std::to_string(fd) +
                           " is not a memfd (it does not support seals)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return systemError("sim import: fstat", errno);
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != bytes) {
    return invalidArgument("sim import: the memfd holds " + std::to_string(st.st_size) +
                           " bytes, the handle says " + std::to_string(bytes));
  }
  if ((seals & kRequiredSeals) != kRequiredSeals) {
    return invalidArgument(
        "sim import: the memfd lacks the SHRINK and GROW seals (its owner could resize it under "
        "this mapping)");
  }
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return systemError("sim import: dup", errno);
  auto data = mapShared(own.get(), bytes, "sim import");
  if (!data) {
    // A write seal makes a shared writable mapping fail with EPERM: the memory is not usable as
    // a device buffer, which is the caller's mistake rather than ours.
    if (data.status().code() == Code::PermissionDenied) {
      return invalidArgument("sim import: the memfd is sealed against writing");
    }
    return data.status();
  }
  return SimAllocation(std::move(own), *data, bytes);
}

}  // namespace hc::simdev
