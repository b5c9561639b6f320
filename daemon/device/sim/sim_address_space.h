// SimAddressSpace: which sim device owns each range of this process's memory (its imports and
// device allocations), as unified addressing tells a CUDA or HIP runtime whose memory a pointer
// is. SimDevice asks it so that what fails on GPUs fails here too: a kernel that touches another
// device's memory, a copy that reaches another vendor's. Host memory (pinned or not) belongs to
// no device and every device reaches it.
// Internal to daemon/device/sim. Thread-safe: one mutex, held for map updates and lookups only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "daemon/device/device.h"

namespace hc::device {

struct SimOwner {
  const void* device = nullptr;  // the SimDevice, as an identity only
  Vendor vendor = Vendor::Host;
  std::string name;  // "sim nvidia:1"
};

class SimAddressSpace {
 public:
  // One per process: sim devices of every registry in the process share one address space.
  static SimAddressSpace& instance();

  void add(const void* begin, size_t bytes, SimOwner owner);
  void remove(const void* begin);
  // The device whose range holds `ptr`; nullopt for memory no sim device owns.
  std::optional<SimOwner> ownerOf(const void* ptr) const;

 private:
  struct Range {
    uintptr_t end;
    SimOwner owner;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Range> ranges_;  // by first byte; ranges never overlap
};

}  // namespace hc::device
