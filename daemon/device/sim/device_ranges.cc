#include "daemon/device/sim/device_ranges.h"

#include <iterator>
#include <utility>

namespace hc::device {

void DeviceRanges::add(const void* begin, size_t bytes, std::string label) {
  const auto first = reinterpret_cast<uintptr_t>(begin);
  ranges_[first] = Range{first + bytes, std::move(label)};
}

void DeviceRanges::remove(const void* begin) { ranges_.erase(reinterpret_cast<uintptr_t>(begin)); }

Status DeviceRanges::check(const void* ptr, size_t bytes, const char* what) const {
  if (bytes == 0 || ranges_.empty()) return okStatus();
  const auto first = reinterpret_cast<uintptr_t>(ptr);
  if (first + bytes < first) {
    return invalidArgument(std::string(what) + " of " + std::to_string(bytes) +
                           " bytes wraps around the address space");
  }
  const uintptr_t last = first + bytes;  // one past the end
  // The range starting at or before ptr, if any.
  auto after = ranges_.upper_bound(first);
  if (after != ranges_.begin()) {
    auto containing = std::prev(after);
    const uintptr_t begin = containing->first;
    const Range& range = containing->second;
    if (first < range.end) {
      if (last <= range.end) return okStatus();
      return invalidArgument(std::string(what) + " of " + std::to_string(bytes) +
                             " bytes at offset " + std::to_string(first - begin) +
                             " runs past the end of " + range.label + " (" +
                             std::to_string(range.end - begin) + " bytes)");
    }
  }
  // Memory outside every range (host memory); it must not run into the next range.
  if (after != ranges_.end() && last > after->first) {
    return invalidArgument(std::string(what) + " of " + std::to_string(bytes) +
                           " bytes starts outside this device's memory and runs into " +
                           after->second.label);
  }
  return okStatus();
}

}  // namespace hc::device
