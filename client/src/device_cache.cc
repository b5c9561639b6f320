#include "client/src/device_cache.h"

#include <algorithm>

namespace hc::client {

std::optional<uint32_t> DeviceRegionCache::acquire(const std::string& runtime,
                                                   uint64_t allocationId) {
  auto it = entries_.find({runtime, allocationId});
  if (it == entries_.end()) return std::nullopt;
  ++it->second.uses;
  it->second.lastUse = ++tick_;
  return it->second.region;
}

void DeviceRegionCache::insert(const std::string& runtime, uint64_t allocationId, uintptr_t base,
                               uint64_t bytes, uint32_t region) {
  Key key{runtime, allocationId};
  if (auto old = entries_.find(key); old != entries_.end()) drop(old);  // a racing registration
  entries_[key] = Entry{region, bytes, base, 1, 0, ++tick_};
  keyOf_[region] = key;
  allocationAt_[{runtime, base}] = allocationId;
  bytes_ += bytes;
}

void DeviceRegionCache::release(uint32_t region) {
  if (auto d = doomedInUse_.find(region); d != doomedInUse_.end()) {
    if (--d->second == 0) {
      doomed_.push_back(region);
      doomedInUse_.erase(d);
    }
    return;
  }
  auto k = keyOf_.find(region);
  if (k == keyOf_.end()) return;
  auto it = entries_.find(k->second);
  if (it != entries_.end() && it->second.uses > 0) --it->second.uses;
}

void DeviceRegionCache::claimBase(const std::string& runtime, uintptr_t base,
                                  uint64_t allocationId) {
  auto at = allocationAt_.find({runtime, base});
  if (at == allocationAt_.end() || at->second == allocationId) return;
  // The allocation that lived here was freed without the client seeing it (the id is unique for
  // an allocation's life): its region maps memory the owner no longer has.
  forget(runtime, at->second);
}

void DeviceRegionCache::forget(const std::string& runtime, uint64_t allocationId) {
  auto it = entries_.find({runtime, allocationId});
  if (it != entries_.end()) drop(it);
}

bool DeviceRegionCache::pin(const std::string& runtime, uint64_t allocationId) {
  auto it = entries_.find({runtime, allocationId});
  if (it == entries_.end()) return false;
  ++it->second.pins;
  return true;
}

void DeviceRegionCache::unpin(const std::string& runtime, uint64_t allocationId) {
  auto it = entries_.find({runtime, allocationId});
  if (it != entries_.end() && it->second.pins > 0) --it->second.pins;
}

void DeviceRegionCache::evictFor(uint64_t incoming, uint64_t cap) {
  if (cap == 0) return;
  while (bytes_ + incoming > cap) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = it->second;
      if (e.uses != 0 || e.pins != 0) continue;
      if (victim == entries_.end() || e.lastUse < victim->second.lastUse) victim = it;
    }
    if (victim == entries_.end()) return;  // everything left is pinned or in use
    drop(victim);
  }
}

void DeviceRegionCache::evictIdle() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.uses == 0 && it->second.pins == 0) drop(it);
    it = next;
  }
}

std::vector<uint32_t> DeviceRegionCache::takeDoomed() { return std::exchange(doomed_, {}); }

const DeviceRegionCache::Entry* DeviceRegionCache::find(const std::string& runtime,
                                                        uint64_t allocationId) const {
  auto it = entries_.find({runtime, allocationId});
  return it == entries_.end() ? nullptr : &it->second;
}

void DeviceRegionCache::drop(std::map<Key, Entry>::iterator it) {
  const Entry& e = it->second;
  if (e.uses == 0) {
    doomed_.push_back(e.region);
  } else {
    doomedInUse_[e.region] = e.uses;
  }
  keyOf_.erase(e.region);
  auto at = allocationAt_.find({it->first.first, e.base});
  if (at != allocationAt_.end() && at->second == it->first.second) allocationAt_.erase(at);
  bytes_ -= e.bytes;
  entries_.erase(it);
}

}  // namespace hc::client
