// DoneFlagPool: the "done" flags of stream-ordered operations (protocol.h, DoneFlag), in pages of
// the client's segment, so the daemon writes them where it writes completions and the caller's
// stream waits on them. Each page is registered with a runtime (host-mapped for the device) the
// first time that runtime's stream waits on one of its flags. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "client/src/device_runtime.h"
#include "client/src/staging.h"
#include "common/ipc/protocol.h"
#include "common/status.h"

namespace hc::client {

class Connection;

// A slot holds the flag and, after it, 8 bytes for the operation's pre-multiplied-sum scalar
// when that lives in device memory (copied there in stream order: stream_ops.cc).
inline constexpr uint64_t kDoneSlotScalarOffset = sizeof(ipc::DoneFlag);
inline constexpr uint64_t kDoneSlotBytes = 16;

struct DoneSlot {
  ipc::DoneFlag* flag = nullptr;
  uint64_t offset = 0;  // segment offset, as the entry's doneFlag names it
  void* scalar() const { return reinterpret_cast<uint8_t*>(flag) + kDoneSlotScalarOffset; }
};

class DoneFlagPool {
 public:
  explicit DoneFlagPool(Connection* conn) : conn_(conn) {}

  // A cleared flag in a page registered with `runtime`.
  Result<DoneSlot> acquire(DeviceRuntime* runtime);
  // Only after the operation finished: neither the daemon nor the stream uses it any more.
  void release(const DoneSlot& slot);

 private:
  Status registerPage(DeviceRuntime* runtime, const SegmentBlock& page);

  Connection* conn_;
  std::mutex mutex_;
  std::vector<SegmentBlock> pages_;
  std::vector<DoneSlot> free_;
  std::set<std::pair<DeviceRuntime*, uint64_t>> registered_;  // (runtime, page offset)
};

}  // namespace hc::client
