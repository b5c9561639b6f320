// LoopbackFabric and the endpoint state transitions shared by every endpoint.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <utility>

#include "daemon/transport/loopback/loopback_state.h"
#include "daemon/transport/loopback/loopback_transport.h"

namespace hc::transport {
namespace {

std::atomic<uint64_t> nextFabricId{1};

}  // namespace

// ---- Endpoint --------------------------------------------------------------------------------

void LoopbackFabric::Endpoint::signalIfIdle() {
  if (!ready.empty() || !failures.empty()) return;  // already signalled, not yet drained
  uint64_t one = 1;
  // Only EAGAIN can fail here (the counter is saturated), and then the fd is readable anyway.
  (void)!::write(eventFd, &one, sizeof(one));
}

void LoopbackFabric::Endpoint::finish(RequestId request, Status status, size_t bytes) {
  Request& r = requests.at(request);
  HC_CHECK(r.state != State::Done);
  if (r.state == State::Posted) {
    auto it = posted.find(MatchKey{r.peer, r.tag});
    if (it != posted.end()) {
      std::erase(it->second, request);
      if (it->second.empty()) posted.erase(it);
    }
    signalIfIdle();
    ready.push_back(request);
    r.state = State::Ready;
  }
  r.status = std::move(status);
  r.bytes = r.status.isOk() ? bytes : 0;
}

void LoopbackFabric::Endpoint::failPeer(PeerId peer, const Status& why, bool notify) {
  for (auto& [id, r] : requests) {
    if (r.peer == peer && r.state != State::Done) finish(id, why);
  }
  std::erase_if(unexpected, [peer](const auto& entry) { return entry.first.peer == peer; });
  if (notify && connected.count(peer) && reportedFailed.insert(peer).second) {
    signalIfIdle();
    failures.emplace_back(peer, why);
  }
}

RequestId LoopbackFabric::Endpoint::add(Request request) {
  RequestId id = nextRequest++;
  requests.emplace(id, std::move(request));
  return id;
}

// ---- LoopbackFabric --------------------------------------------------------------------------

LoopbackFabric::LoopbackFabric() : fabricId_(nextFabricId.fetch_add(1)) {}

LoopbackFabric::~LoopbackFabric() {
  std::lock_guard<std::mutex> lock(mutex_);
  HC_CHECK(endpoints_.empty());  // endpoints borrow the fabric
}

Result<std::unique_ptr<LoopbackTransport>> LoopbackFabric::attach() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) return systemError("loopback: eventfd", errno);
  std::lock_guard<std::mutex> lock(mutex_);
  PeerId id = nextId_++;
  endpoints_.emplace(id, std::make_unique<Endpoint>(id, fd.get()));
  return std::unique_ptr<LoopbackTransport>(new LoopbackTransport(*this, id, std::move(fd)));
}

Status LoopbackFabric::kill(PeerId peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dead_.count(peer)) return okStatus();
  if (!endpoints_.count(peer)) {
    return notFound("loopback: no endpoint " + std::to_string(peer) + " on this fabric");
  }
  killLocked(peer);
  return okStatus();
}

void LoopbackFabric::detach(PeerId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!dead_.count(id)) killLocked(id);
  endpoints_.erase(id);
}

void LoopbackFabric::killLocked(PeerId id) {
  dead_.insert(id);
  Endpoint& victim = *endpoints_.at(id);
  victim.dead = true;
  Status self = unavailable("loopback endpoint " + std::to_string(id) + " was killed");
  for (auto& [rid, r] : victim.requests) {
    if (r.state != Endpoint::State::Done) victim.finish(rid, self);
  }
  victim.unexpected.clear();
  Status why = unavailable("loopback peer " + std::to_string(id) + " failed");
  for (auto& [other, ep] : endpoints_) {
    if (other != id && !ep->dead) ep->failPeer(id, why, /*notify=*/true);
  }
}

LoopbackFabric::Endpoint* LoopbackFabric::liveLocked(PeerId id) {
  if (dead_.count(id)) return nullptr;
  auto it = endpoints_.find(id);
  return it == endpoints_.end() ? nullptr : it->second.get();
}

}  // namespace hc::transport
