#include "daemon/transport/loopback/loopback_transport.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "daemon/transport/loopback/loopback_state.h"

namespace hc::transport {
namespace {

// An address is the fabric's id followed by the endpoint's id, in host byte order (one process).
constexpr size_t kAddressBytes = sizeof(uint64_t) + sizeof(PeerId);

std::string describe(PeerId peer, const Tag& tag) {
  return "peer " + std::to_string(peer) + " tag " + tagString(tag);
}

Status truncated(size_t message, size_t buffer, PeerId peer, const Tag& tag) {
  return Status(Code::TransportError, "message of " + std::to_string(message) + " B from " +
                                          describe(peer, tag) + " is longer than the " +
                                          std::to_string(buffer) + " B receive buffer");
}

Status tooShort(size_t message, size_t minBytes) {
  return Status(Code::TransportError, "a message of " + std::to_string(message) +
                                          " B cannot land in device memory (at least " +
                                          std::to_string(minBytes) + " B)");
}

Status unmoved(MemoryKind kind) {
  return invalidArgument(std::string("the loopback transport does not move ") +
                         memoryKindName(kind) + " memory");
}

}  // namespace

LoopbackTransport::LoopbackTransport(LoopbackFabric& fabric, PeerId id, UniqueFd eventFd)
    : fabric_(fabric), id_(id), eventFd_(std::move(eventFd)) {}

LoopbackTransport::~LoopbackTransport() { fabric_.detach(id_); }

LoopbackTransport::Endpoint& LoopbackTransport::self() { return *fabric_.endpoints_.at(id_); }

PeerAddress LoopbackTransport::address() const {
  PeerAddress address;
  address.bytes.resize(kAddressBytes);
  std::memcpy(address.bytes.data(), &fabric_.fabricId_, sizeof(uint64_t));
  std::memcpy(address.bytes.data() + sizeof(uint64_t), &id_, sizeof(PeerId));
  return address;
}

Result<PeerId> LoopbackTransport::connect(const PeerAddress& address) {
  uint64_t fabricId = 0;
  PeerId peer = 0;
  if (address.bytes.size() == kAddressBytes) {
    std::memcpy(&fabricId, address.bytes.data(), sizeof(uint64_t));
    std::memcpy(&peer, address.bytes.data() + sizeof(uint64_t), sizeof(PeerId));
  }
  if (fabricId != fabric_.fabricId_) {
    return invalidArgument("loopback: not an address on this endpoint's fabric");
  }
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  if (self().dead) return unavailable("loopback endpoint " + std::to_string(id_) + " was killed");
  if (fabric_.dead_.count(peer)) {
    return unavailable("loopback peer " + std::to_string(peer) + " failed");
  }
  if (!fabric_.endpoints_.count(peer)) {
    return notFound("loopback: no endpoint " + std::to_string(peer));
  }
  self().connected.insert(peer);
  return peer;
}

Status LoopbackTransport::disconnect(PeerId peer) {
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  Endpoint& me = self();
  if (!me.connected.count(peer)) return notFound("peer " + std::to_string(peer) + " not connected");
  me.failPeer(peer, unavailable("disconnected from peer " + std::to_string(peer)),
              /*notify=*/false);
  me.connected.erase(peer);
  me.reportedFailed.erase(peer);
  return okStatus();
}

Status LoopbackTransport::checkPeerLocked(PeerId peer) {
  Endpoint& me = self();
  if (me.dead) return unavailable("loopback endpoint " + std::to_string(id_) + " was killed");
  if (!me.connected.count(peer)) return notFound("peer " + std::to_string(peer) + " not connected");
  if (fabric_.dead_.count(peer)) {
    return unavailable("loopback peer " + std::to_string(peer) + " failed");
  }
  return okStatus();
}

bool LoopbackTransport::movesMemory(MemoryKind kind) const {
  return kind == MemoryKind::Host ||
         std::find(claimed_.begin(), claimed_.end(), kind) != claimed_.end();
}

Result<RequestId> LoopbackTransport::postSend(PeerId peer, Tag tag, const void* buf, size_t bytes,
                                              MemoryKind kind) {
  if (buf == nullptr && bytes > 0) return invalidArgument("postSend: null buffer");
  if (!movesMemory(kind)) return unmoved(kind);
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  HC_RETURN_IF_ERROR(checkPeerLocked(peer));
  Endpoint& to = *fabric_.liveLocked(peer);
  const MatchKey key{id_, tag};
  auto waiting = to.posted.find(key);
  if (waiting != to.posted.end()) {
    // The receive was posted first: copy straight into its buffer.
    RequestId recv = waiting->second.front();
    Endpoint::Request& r = to.requests.at(recv);
    if (bytes > r.capacity) {
      to.finish(recv, truncated(bytes, r.capacity, id_, tag));
    } else if (bytes > 0 && bytes < r.minBytes) {
      to.finish(recv, tooShort(bytes, r.minBytes));
    } else {
      if (bytes > 0) std::memcpy(r.buf, buf, bytes);
      to.finish(recv, okStatus(), bytes);
    }
  } else {
    auto* data = static_cast<const uint8_t*>(buf);
    to.unexpected[key].push_back(
        UnexpectedCopy{{data, data + bytes}, std::chrono::steady_clock::now()});
  }
  // The data has left the buffer either way, so the send is complete.
  Endpoint& me = self();
  RequestId id = me.add(Endpoint::Request{peer, tag, nullptr, 0});
  me.finish(id, okStatus(), bytes);
  return id;
}

Result<RequestId> LoopbackTransport::postRecv(PeerId peer, Tag tag, void* buf, size_t bytes,
                                              MemoryKind kind) {
  if (buf == nullptr && bytes > 0) return invalidArgument("postRecv: null buffer");
  if (!movesMemory(kind)) return unmoved(kind);
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  HC_RETURN_IF_ERROR(checkPeerLocked(peer));
  Endpoint& me = self();
  const MatchKey key{peer, tag};
  const size_t minBytes = kind == MemoryKind::Host ? 0 : minBytes_;
  RequestId id = me.add(Endpoint::Request{peer, tag, buf, bytes, minBytes});
  auto arrived = me.unexpected.find(key);
  if (arrived == me.unexpected.end()) {
    me.posted[key].push_back(id);
    return id;
  }
  // The message came first: take the oldest one with this key.
  std::vector<uint8_t> message = std::move(arrived->second.front().data);
  arrived->second.pop_front();
  if (arrived->second.empty()) me.unexpected.erase(arrived);
  if (message.size() > bytes) {
    me.finish(id, truncated(message.size(), bytes, peer, tag));
  } else if (!message.empty() && message.size() < minBytes) {
    me.finish(id, tooShort(message.size(), minBytes));
  } else {
    if (!message.empty()) std::memcpy(buf, message.data(), message.size());
    me.finish(id, okStatus(), message.size());
  }
  return id;
}

Result<bool> LoopbackTransport::test(RequestId request, size_t* bytes) {
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  Endpoint& me = self();
  auto it = me.requests.find(request);
  if (it == me.requests.end()) return notFound("unknown request " + std::to_string(request));
  if (it->second.state != Endpoint::State::Done) return false;
  Status status = std::move(it->second.status);
  size_t moved = it->second.bytes;
  me.requests.erase(it);
  if (!status.isOk()) return status;
  if (bytes != nullptr) *bytes = moved;
  return true;
}

size_t LoopbackTransport::progress() {
  // Drain the readiness first: whatever is queued after this read signals the fd again.
  uint64_t counter;
  (void)!::read(eventFd_.get(), &counter, sizeof(counter));
  std::vector<RequestId> ready;
  std::vector<std::pair<PeerId, Status>> failures;
  PeerFailureHandler handler;
  {
    std::lock_guard<std::mutex> lock(fabric_.mutex_);
    Endpoint& me = self();
    ready.swap(me.ready);
    failures.swap(me.failures);
    for (RequestId id : ready) me.requests.at(id).state = Endpoint::State::Done;
    if (!failures.empty()) handler = me.handler;
  }
  if (handler) {
    for (const auto& [peer, why] : failures) handler(peer, why);
  }
  return ready.size() + failures.size();
}

Status LoopbackTransport::cancel(RequestId request) {
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  Endpoint& me = self();
  auto it = me.requests.find(request);
  if (it == me.requests.end()) return notFound("unknown request " + std::to_string(request));
  if (it->second.state == Endpoint::State::Posted) me.finish(request, unavailable("cancelled"));
  return okStatus();
}

size_t LoopbackTransport::dropUnexpected(
    const std::function<bool(const UnexpectedMessage&)>& drop) {
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  size_t dropped = 0;
  auto& unexpected = self().unexpected;
  for (auto entry = unexpected.begin(); entry != unexpected.end();) {
    const MatchKey& key = entry->first;
    // Each queue is oldest first; what is kept keeps its order.
    std::deque<UnexpectedCopy> kept;
    for (UnexpectedCopy& copy : entry->second) {
      if (drop(UnexpectedMessage{key.peer, key.tag, copy.data.size(), copy.arrived})) {
        ++dropped;
      } else {
        kept.push_back(std::move(copy));
      }
    }
    if (kept.empty()) {
      entry = unexpected.erase(entry);
    } else {
      entry->second = std::move(kept);
      ++entry;
    }
  }
  return dropped;
}

void LoopbackTransport::setPeerFailureHandler(PeerFailureHandler handler) {
  std::lock_guard<std::mutex> lock(fabric_.mutex_);
  self().handler = std::move(handler);
}

}  // namespace hc::transport
