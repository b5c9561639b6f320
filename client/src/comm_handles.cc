// The registry of hc_comm_t handles (comm_handles.h).
#include "client/src/comm_handles.h"

#include <pthread.h>

#include <deque>
#include <mutex>
#include <new>
#include <unordered_set>
#include <utility>
#include <vector>

namespace hc::client {
namespace {

struct Registry {
  std::mutex mutex;  // guards everything below and every handle's life
  // Every handle that may still be pinned: live ones and ended ones not yet freed. A pointer is
  // looked up here before it is read, so an unknown one is never dereferenced.
  std::unordered_set<const hc_comm*> known;
  std::deque<hc_comm*> ended;  // the kept ended handles, oldest first
};

Registry* gRegistry = nullptr;  // never freed: detached threads may pin while statics go away

void childAfterFork() {
  // Only this thread exists in the child, and another thread may have held the lock at fork.
  if (gRegistry != nullptr) new (&gRegistry->mutex) std::mutex();
}

Registry& registry() {
  static Registry* const r = [] {
    gRegistry = new Registry;
    ::pthread_atfork(nullptr, nullptr, childAfterFork);
    return gRegistry;
  }();
  return *r;
}

}  // namespace

hc_comm* newCommHandle(std::shared_ptr<CommState> state) {
  auto* handle = new (std::nothrow) hc_comm{std::move(state), {}};
  if (handle == nullptr) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.known.insert(handle);
  return handle;
}

void discardCommHandle(hc_comm* handle) {
  if (handle == nullptr) return;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.known.erase(handle);
  }
  delete handle;
}

CommPin::CommPin(hc_comm_t comm) {
  if (comm == nullptr) {
    status_ = invalidArgument("communicator is NULL");
    return;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.known.count(comm) == 0) {
    status_ = invalidArgument(
        "not a communicator of this process (never made, or destroyed or aborted long ago)");
    return;
  }
  handle_ = comm;
  ++handle_->life.pins;
  endedAs_ = handle_->life.end;
  if (endedAs_ == HandleEnd::Aborted) status_ = unavailable("the communicator was aborted");
  if (endedAs_ == HandleEnd::Destroyed) status_ = invalidArgument("the communicator was destroyed");
}

CommPin::~CommPin() {
  if (handle_ == nullptr) return;
  bool free = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    free = --handle_->life.pins == 0 && handle_->life.expired;
    if (free) r.known.erase(handle_);
  }
  if (free) delete handle_;
}

bool CommPin::end(HandleEnd how) {
  std::vector<hc_comm*> freed;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (handle_->life.end != HandleEnd::Live) return false;
    handle_->life.end = how;
    r.ended.push_back(handle_);
    while (r.ended.size() > kKeptEndedHandles) {
      hc_comm* oldest = r.ended.front();
      r.ended.pop_front();
      if (oldest->life.pins > 0) {
        oldest->life.expired = true;  // its last pin frees it
      } else {
        r.known.erase(oldest);
        freed.push_back(oldest);
      }
    }
  }
  // Outside the lock: the last reference to a state may go with its handle.
  for (hc_comm* h : freed) delete h;
  return true;
}

}  // namespace hc::client
