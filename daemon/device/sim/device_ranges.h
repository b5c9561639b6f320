// DeviceRanges: the address ranges a sim device owns (imports and pinned allocations), so that a
// copy starting inside one cannot run past its end: what a GPU reports as an illegal address.
// Internal to daemon/device/sim. Not thread-safe: SimDevice guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace hc::device {

class DeviceRanges {
 public:
  // `label` names the range in errors ("sim import 3", "pinned allocation").
  void add(const void* begin, size_t bytes, std::string label);
  void remove(const void* begin);
  // Ok when [ptr, ptr + bytes) lies inside one range or touches none; InvalidArgument naming the
  // range and `what` ("copy source") when it starts in a range and runs past its end, or starts
  // outside every range and runs into one.
  [[nodiscard]] Status check(const void* ptr, size_t bytes, const char* what) const;
  bool empty() const { return ranges_.empty(); }

 private:
  struct Range {
    uintptr_t end;
    std::string label;
  };
  std::map<uintptr_t, Range> ranges_;  // by first byte; ranges never overlap
};

}  // namespace hc::device
