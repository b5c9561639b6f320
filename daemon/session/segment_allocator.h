// SegmentAllocator: the daemon-side allocator of one client's segment heap. Its state lives in
// daemon memory only, never in the shared segment, so a client cannot corrupt it; the daemon
// checks every buffer a client names against it (contains()).
// Depends on hc_common.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>

#include "common/status.h"

namespace hc::session {

// Not synchronized: the thread that owns the client's Session calls it.
class SegmentAllocator {
 public:
  // Manages [heapOffset, heapOffset + heapBytes), shrunk inwards to multiples of alignment (a
  // power of two). Offsets are segment offsets.
  SegmentAllocator(uint64_t heapOffset, uint64_t heapBytes, uint64_t alignment = 4096);

  // First fit. Returns the offset of a new allocation of `bytes` rounded up to the alignment.
  // bytes == 0 is InvalidArgument; no free block large enough is NoResource (the message says
  // how much was asked and the largest free block).
  [[nodiscard]] hc::Result<uint64_t> allocate(uint64_t bytes);
  // NotFound unless offset starts a live allocation. Coalesces with free neighbours.
  [[nodiscard]] hc::Status free(uint64_t offset);

  // Size (rounded) of the live allocation starting at offset; 0 if none starts there.
  uint64_t sizeAt(uint64_t offset) const;
  // True when [offset, offset + bytes) lies inside one live allocation. Overflow-safe: offset and
  // bytes come from the client, and offset + bytes may wrap. bytes == 0 is inside when offset is
  // within or at the end of a live allocation.
  bool contains(uint64_t offset, uint64_t bytes) const;

  uint64_t bytesInUse() const { return bytesInUse_; }
  size_t liveCount() const { return live_.size(); }
  uint64_t largestFree() const { return freeSizes_.empty() ? 0 : *freeSizes_.rbegin(); }

 private:
  void addFree(uint64_t offset, uint64_t bytes);
  void removeFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t alignment_;
  std::map<uint64_t, uint64_t> live_;  // offset -> rounded size
  std::map<uint64_t, uint64_t> free_;  // offset -> size; never two adjacent blocks
  std::multiset<uint64_t> freeSizes_;  // sizes of free_, for largestFree()
  uint64_t bytesInUse_ = 0;
};

}  // namespace hc::session
