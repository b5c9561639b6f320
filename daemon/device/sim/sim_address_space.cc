#include "daemon/device/sim/sim_address_space.h"

#include <iterator>
#include <utility>

namespace hc::device {

SimAddressSpace& SimAddressSpace::instance() {
  static SimAddressSpace space;
  return space;
}

void SimAddressSpace::add(const void* begin, size_t bytes, SimOwner owner) {
  const auto first = reinterpret_cast<uintptr_t>(begin);
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[first] = Range{first + bytes, std::move(owner)};
}

void SimAddressSpace::remove(const void* begin) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_.erase(reinterpret_cast<uintptr_t>(begin));
}

std::optional<SimOwner> SimAddressSpace::ownerOf(const void* ptr) const {
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto after = ranges_.upper_bound(at);
  if (after == ranges_.begin()) return std::nullopt;
  const auto& [first, range] = *std::prev(after);
  if (at >= range.end) return std::nullopt;
  return range.owner;
}

}  // namespace hc::device
