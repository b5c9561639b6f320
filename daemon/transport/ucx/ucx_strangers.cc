#include "daemon/transport/ucx/ucx_strangers.h"

namespace hc::transport::ucx {

bool RefusalCounter::count(Clock::time_point now) {
  ++total_;
  if (nextLog_ && now < *nextLog_) {
    ++unlogged_;
    return false;
  }
  nextLog_ = now + kLogInterval;
  reportedUnlogged_ = unlogged_;
  unlogged_ = 0;
  return true;
}

PendingHellos::Added PendingHellos::add(uint64_t uuid, PeerId stamp) {
  if (byUuid_.contains(uuid)) return Added::Repeated;
  Added added = Added::New;
  if (byUuid_.size() >= capacity_ && !byArrival_.empty()) {
    auto oldest = byArrival_.begin();
    byUuid_.erase(oldest->second);
    byArrival_.erase(oldest);
    added = Added::NewEvicting;
  }
  const uint64_t arrival = nextArrival_++;
  byUuid_.emplace(uuid, Entry{stamp, arrival});
  byArrival_.emplace(arrival, uuid);
  return added;
}

std::optional<PeerId> PendingHellos::take(uint64_t uuid) {
  auto found = byUuid_.find(uuid);
  if (found == byUuid_.end()) return std::nullopt;
  const PeerId stamp = found->second.stamp;
  byArrival_.erase(found->second.arrival);
  byUuid_.erase(found);
  return stamp;
}

}  // namespace hc::transport::ucx
