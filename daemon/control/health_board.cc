#include "daemon/control/health_board.h"

#include <algorithm>

namespace hc::control {

const char* servingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::Unknown:
      return "UNKNOWN";
    case ServingStatus::Serving:
      return "SERVING";
    case ServingStatus::NotServing:
      return "NOT_SERVING";
    case ServingStatus::ServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

void HealthBoard::set(std::string_view service, ServingStatus status) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  auto it = statuses_.find(service);
  if (it == statuses_.end()) {
    it = statuses_.emplace(std::string(service), status).first;
  } else if (it->second == status) {
    return;
  } else {
    it->second = status;
  }
  notifyLocked(it->first, status);
}

void HealthBoard::setAllNotServing() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  for (auto& [service, status] : statuses_) {
    if (status == ServingStatus::NotServing) continue;
    status = ServingStatus::NotServing;
    notifyLocked(service, status);
  }
}

std::optional<ServingStatus> HealthBoard::get(std::string_view service) const {
  std::lock_guard lock(mutex_);
  auto it = statuses_.find(service);
  if (it == statuses_.end()) return std::nullopt;
  return it->second;
}

std::optional<ServingStatus> HealthBoard::subscribe(std::string_view service,
                                                    HealthWatcher* watcher) {
  std::lock_guard lock(mutex_);
  if (closed_) return std::nullopt;
  watchers_.push_back({std::string(service), watcher});
  auto it = statuses_.find(service);
  return it == statuses_.end() ? ServingStatus::ServiceUnknown : it->second;
}

void HealthBoard::unsubscribe(HealthWatcher* watcher) {
  std::lock_guard lock(mutex_);
  std::erase_if(watchers_, [&](const Subscription& s) { return s.watcher == watcher; });
}

size_t HealthBoard::watcherCount() const {
  std::lock_guard lock(mutex_);
  return watchers_.size();
}

void HealthBoard::close() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  closed_ = true;
  // Watchers stay listed until they unsubscribe: a stream still finishing may not be freed under
  // our feet, and unsubscribe() is how it says it is gone.
  for (const Subscription& s : watchers_) s.watcher->onClose();
}

void HealthBoard::notifyLocked(const std::string& service, ServingStatus status) {
  for (const Subscription& s : watchers_) {
    if (s.service == service) s.watcher->onStatus(status);
  }
}

}  // namespace hc::control
