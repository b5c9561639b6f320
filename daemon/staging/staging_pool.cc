#include "daemon/staging/staging_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <string>

namespace hc::staging {

StagingPool::~StagingPool() {
  for (auto& [bytes, data] : idle_) ::munmap(data, bytes);
}

Result<StagingPool::Buffer> StagingPool::acquire(uint64_t bytes) {
  // Checked before rounding up: bit_ceil of anything above 2^63 is undefined.
  if (bytes > liveCap_) {
    return Status{Code::NoResource, "an operation needs " + std::to_string(bytes) +
                                        " bytes of host staging; session.max_staging_bytes is " +
                                        std::to_string(liveCap_)};
  }
  const uint64_t size = std::bit_ceil(std::max<uint64_t>(bytes, 4096));
  if (liveBytes_ + size > liveCap_) {
    return Status{Code::NoResource,
                  "host staging is in use up to session.max_staging_bytes (" +
                      std::to_string(liveBytes_) + " of " + std::to_string(liveCap_) +
                      " bytes); this operation needs " + std::to_string(size) + " more"};
  }
  auto it = idle_.find(size);
  if (it != idle_.end()) {
    Buffer b{it->second, size};
    idleBytes_ -= size;
    idle_.erase(it);
    liveBytes_ += size;
    return b;
  }
  // MAP_POPULATE: pay for the page faults once, here, rather than inside the reduction.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return systemError("mmap of a staging buffer", errno);
  liveBytes_ += size;
  return Buffer{static_cast<uint8_t*>(p), size};
}

void StagingPool::release(Buffer b) {
  if (b.data == nullptr) return;
  liveBytes_ -= b.bytes;
  if (idleBytes_ + b.bytes > idleCap_) {
    ::munmap(b.data, b.bytes);
    return;
  }
  idleBytes_ += b.bytes;
  idle_.emplace(b.bytes, b.data);
}

}  // namespace hc::staging
