#include "daemon/session/segment_allocator.h"

#include <iterator>
#include <string>
#include <utility>

namespace hc::session {

SegmentAllocator::SegmentAllocator(uint64_t heapOffset, uint64_t heapBytes, uint64_t alignment)
    : alignment_(alignment) {
  HC_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0);
  HC_CHECK(heapBytes <= UINT64_MAX - heapOffset);
  const uint64_t mask = alignment - 1;
  const uint64_t end = (heapOffset + heapBytes) & ~mask;
  // Rounding the start up cannot wrap past end: end is itself aligned and >= heapOffset.
  if (heapOffset > end) return;
  const uint64_t begin = heapOffset + ((alignment - (heapOffset & mask)) & mask);
  if (begin < end) addFree(begin, end - begin);
}

hc::Result<uint64_t> SegmentAllocator::allocate(uint64_t bytes) {
  if (bytes == 0) return invalidArgument("cannot allocate 0 bytes");
  const uint64_t mask = alignment_ - 1;
  auto noRoom = [&] {
    std::string m = "cannot allocate " + std::to_string(bytes) + " bytes: the largest free block";
    m += " of the segment heap is " + std::to_string(largestFree()) + " bytes";
    return hc::Status(Code::NoResource, std::move(m));
  };
  if (bytes > UINT64_MAX - mask) return noRoom();
  const uint64_t rounded = (bytes + mask) & ~mask;
  if (rounded > largestFree()) return noRoom();
  // First fit, in address order: keeps the heap compact at its start.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < rounded) continue;
    const uint64_t offset = it->first;
    const uint64_t rest = it->second - rounded;
    removeFree(it);
    if (rest > 0) addFree(offset + rounded, rest);
    live_.emplace(offset, rounded);
    bytesInUse_ += rounded;
    return offset;
  }
  return noRoom();  // unreachable while freeSizes_ mirrors free_
}

hc::Status SegmentAllocator::free(uint64_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) {
    return notFound("offset " + std::to_string(offset) +
                    " does not start a live allocation of the segment heap");
  }
  uint64_t begin = it->first;
  uint64_t size = it->second;
  bytesInUse_ -= size;
  live_.erase(it);
  // Coalesce with the free block that ends where this one starts and the one that starts where
  // it ends, so that free_ never holds two adjacent blocks.
  auto next = free_.lower_bound(begin);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      size += prev->second;
      removeFree(prev);
    }
  }
  next = free_.lower_bound(begin + size);
  if (next != free_.end() && next->first == begin + size) {
    size += next->second;
    removeFree(next);
  }
  addFree(begin, size);
  return okStatus();
}

uint64_t SegmentAllocator::sizeAt(uint64_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second;
}

bool SegmentAllocator::contains(uint64_t offset, uint64_t bytes) const {
  // The allocation starting at or before offset is the only one that can hold it.
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  // Subtractions only: nothing here can wrap, whatever the client sent.
  const uint64_t into = offset - it->first;
  if (into > it->second) return false;
  return bytes <= it->second - into;
}

void SegmentAllocator::addFree(uint64_t offset, uint64_t bytes) {
  free_.emplace(offset, bytes);
  freeSizes_.insert(bytes);
}

void SegmentAllocator::removeFree(std::map<uint64_t, uint64_t>::iterator it) {
  freeSizes_.erase(freeSizes_.find(it->second));
  free_.erase(it);
}

}  // namespace hc::session
