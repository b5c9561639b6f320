// DeviceRegionCache: which device allocations this process has registered with the daemon (one
// region each), and when a region may be dropped. The daemon keeps an imported allocation mapped,
// and so alive in the driver, for as long as the region is registered; this cache is what lets a
// framework's empty_cache() give memory back:
//   - an allocation freed where the client sees it (hc_mem_free, hc_sim_free, ncclMemFree) is
//     forgotten at once (forget);
//   - one freed behind the client's back (cudaFree by a caching allocator) is noticed when its
//     address comes back under another allocation id (claimBase);
//   - past a byte cap, the least recently used idle regions go (evictFor, evictIdle).
// A region is never dropped while pinned (hc_comm_register) or while an operation that names it
// is between deviceRef and its completion (uses > 0): the daemon reads socket frames and ring
// entries on separate events, so an unregister sent while an entry naming the region sits in the
// ring could reach the daemon first and fail that operation. A region forgotten while in use is
// "doomed": it leaves the lookup at once and is handed out for unregistering when its last use
// ends (takeDoomed), never from a destructor that might hold another lock.
// Not thread-safe: Connection guards it with its deviceMutex_. Depends on common/ only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hc::client {

class DeviceRegionCache {
 public:
  struct Entry {
    uint32_t region = 0;
    uint64_t bytes = 0;
    uintptr_t base = 0;
    uint32_t uses = 0;     // operations between deviceRef and completion
    uint32_t pins = 0;     // hc_comm_register handles
    uint64_t lastUse = 0;  // tick of the last acquire, for least-recently-used eviction
  };

  // The region of (runtime, allocation), counted as one more use; nullopt when not cached.
  std::optional<uint32_t> acquire(const std::string& runtime, uint64_t allocationId);
  // Records a freshly registered region, already counted as one use.
  void insert(const std::string& runtime, uint64_t allocationId, uintptr_t base, uint64_t bytes,
              uint32_t region);
  // One use of `region` ended (its operation completed, or failed before submission).
  void release(uint32_t region);
  // The allocation at (runtime, base) is now `allocationId`: regions of other allocations seen
  // at that base were freed by their owner and are forgotten (see forget()).
  void claimBase(const std::string& runtime, uintptr_t base, uint64_t allocationId);
  // The owner freed (runtime, allocation): its region leaves the lookup and, once idle, goes to
  // takeDoomed(). Unknown allocations are ignored.
  void forget(const std::string& runtime, uint64_t allocationId);
  // hc_comm_register / deregister. pin() requires a cached entry (after a deviceRef).
  bool pin(const std::string& runtime, uint64_t allocationId);
  void unpin(const std::string& runtime, uint64_t allocationId);
  // Idle, unpinned regions, least recently used first, dropped until bytes() + incoming <= cap
  // (or none is left to drop). cap 0: no cap.
  void evictFor(uint64_t incoming, uint64_t cap);
  // Every idle, unpinned region is dropped (the daemon refused an import at its own cap).
  void evictIdle();
  // Regions to unregister with the daemon now: evicted, forgotten or doomed ones whose last use
  // ended. Taking them empties the list.
  std::vector<uint32_t> takeDoomed();

  uint64_t bytes() const { return bytes_; }  // of regions still in the lookup
  size_t size() const { return entries_.size(); }
  const Entry* find(const std::string& runtime, uint64_t allocationId) const;

 private:
  using Key = std::pair<std::string, uint64_t>;  // (runtime, allocation id)
  void drop(std::map<Key, Entry>::iterator it);

  std::map<Key, Entry> entries_;
  std::map<uint32_t, Key> keyOf_;                                       // region -> key
  std::map<std::pair<std::string, uintptr_t>, uint64_t> allocationAt_;  // (runtime, base) -> id
  std::map<uint32_t, uint32_t> doomedInUse_;  // region -> uses left, out of the lookup
  std::vector<uint32_t> doomed_;              // ready to unregister
  uint64_t bytes_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace hc::client
