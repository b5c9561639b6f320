// StagingPool: the daemon's pre-faulted host buffers for staged operands (a client's own memory,
// device memory on the CPU-forwarding path, slices of a pipelined collective). Buffers are pooled
// by size class: first touch of fresh pages is slow (1.4 GB/s here), so they are reused.
// Runs on the IPC thread. Depends on hc_common only.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"

namespace hc::staging {

class StagingPool {
 public:
  // liveCapBytes bounds what is handed out at once (session.max_staging_bytes): an acquire
  // beyond it fails with NoResource, so no client's declared sizes can grow the daemon.
  explicit StagingPool(uint64_t idleCapBytes = 256ull << 20, uint64_t liveCapBytes = 8ull << 30)
      : idleCap_(idleCapBytes), liveCap_(liveCapBytes) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Buffer {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;  // the size class: a power of two >= what was asked
  };
  Result<Buffer> acquire(uint64_t bytes);
  void release(Buffer b);

 private:
  uint64_t idleCap_;
  uint64_t liveCap_;
  uint64_t idleBytes_ = 0;
  uint64_t liveBytes_ = 0;  // handed out and not yet released
  std::multimap<uint64_t, uint8_t*> idle_;
};

}  // namespace hc::staging
