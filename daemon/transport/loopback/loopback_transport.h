// Loopback transport: several simulated daemons in one process, each with a LoopbackTransport
// endpoint attached to one shared LoopbackFabric. coll/ runs every algorithm over it in unit
// tests, and fault tests kill endpoints through the fabric.
// Depends on transport.h and hc_common only.
//
// Behaviour, as the Transport contract asks:
// - a send copies its data at post (into a matching receive, or else into the receiver's
//   unexpected queue), so the sender's buffer is free as soon as the send completes; a message
//   in that queue arrived when it was copied there, and dropUnexpected() only frees the copy
//   (its sender was released at post);
// - every final state, success or failure, is reported by test() only after the owning
//   endpoint's progress(), and the endpoint's eventfd is readable while such reports wait;
// - PeerIds are fabric-wide: the id connect() returns for an endpoint is that endpoint's id(),
//   the same on every endpoint, and the one LoopbackFabric::kill() takes.
//
// Threads: unlike the general Transport contract, every method of every endpoint, and of the
// fabric, may be called from any thread. One mutex in the fabric serializes them (a test
// transport prefers simple to fast); payload copies run under it. The peer-failure handler runs
// inside progress() without the mutex, so it may call back into any endpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/transport/transport.h"

namespace hc::transport {

class LoopbackTransport;

class LoopbackFabric {
 public:
  LoopbackFabric();
  // Every endpoint must have been destroyed first (checked).
  ~LoopbackFabric();
  LoopbackFabric(const LoopbackFabric&) = delete;
  LoopbackFabric& operator=(const LoopbackFabric&) = delete;

  // A new endpoint with the next id (1, 2, ...). Borrowed: the fabric must outlive it.
  // An error only when no eventfd can be created.
  [[nodiscard]] Result<std::unique_ptr<LoopbackTransport>> attach();

  // Simulates the death of endpoint `peer`'s daemon. On every other endpoint, each request with
  // that peer that test() has not yet reported final fails with Unavailable, messages from it
  // that wait unmatched are dropped, later posts to it return Unavailable, and, where it was
  // connected, the failure handler is called once (in that endpoint's next progress()). The
  // killed endpoint's own requests fail with Unavailable and its later posts are refused.
  // Killing a dead endpoint again is a no-op; NotFound for an id never attached.
  [[nodiscard]] Status kill(PeerId peer);

 private:
  friend class LoopbackTransport;
  struct Endpoint;  // loopback_state.h; every field guarded by mutex_

  // Removes a destroyed endpoint: to its peers, the same as kill().
  void detach(PeerId id);
  void killLocked(PeerId id);
  // The live endpoint `id`, or null.
  Endpoint* liveLocked(PeerId id);

  const uint64_t fabricId_;  // tells addresses of different fabrics apart
  std::mutex mutex_;
  std::unordered_map<PeerId, std::unique_ptr<Endpoint>> endpoints_;
  std::unordered_set<PeerId> dead_;
  PeerId nextId_ = 1;
};

class LoopbackTransport final : public Transport {
 public:
  // Detaches from the fabric: peers see this endpoint fail, as if its daemon exited.
  ~LoopbackTransport() override;
  LoopbackTransport(const LoopbackTransport&) = delete;
  LoopbackTransport& operator=(const LoopbackTransport&) = delete;

  PeerId id() const { return id_; }
  // Memory kinds besides Host that this endpoint accepts. It moves every kind with memcpy, so a
  // test claims one only for memory the CPU can read (a fake device's). Like UCX, which may copy
  // a short message with the CPU, a message shorter than `minBytes` fails a receive posted in
  // such memory with TransportError (directMinBytes() returns it). Call before any post.
  void claimMemory(std::vector<MemoryKind> kinds, size_t minBytes = 0) {
    claimed_ = std::move(kinds);
    minBytes_ = minBytes;
  }

  // hc::transport::Transport
  std::string_view name() const override { return "loopback"; }
  PeerAddress address() const override;
  Result<PeerId> connect(const PeerAddress& address) override;
  Status disconnect(PeerId peer) override;
  bool movesMemory(MemoryKind kind) const override;
  size_t directMinBytes() const override { return minBytes_; }
  using Transport::postRecv;
  using Transport::postSend;
  Result<RequestId> postSend(PeerId peer, Tag tag, const void* buf, size_t bytes,
                             MemoryKind kind) override;
  Result<RequestId> postRecv(PeerId peer, Tag tag, void* buf, size_t bytes,
                             MemoryKind kind) override;
  using Transport::test;
  Result<bool> test(RequestId request, size_t* bytes) override;
  size_t progress() override;
  Status cancel(RequestId request) override;
  size_t dropUnexpected(const std::function<bool(const UnexpectedMessage&)>& drop) override;
  int eventFd() const override { return eventFd_.get(); }
  void setPeerFailureHandler(PeerFailureHandler handler) override;

 private:
  friend class LoopbackFabric;
  using Endpoint = LoopbackFabric::Endpoint;

  LoopbackTransport(LoopbackFabric& fabric, PeerId id, UniqueFd eventFd);

  // This endpoint's state; the caller holds fabric_.mutex_.
  Endpoint& self();
  // Checks that this endpoint is alive and `peer` is connected and alive.
  Status checkPeerLocked(PeerId peer);

  LoopbackFabric& fabric_;  // borrowed
  const PeerId id_;
  UniqueFd eventFd_;
  std::vector<MemoryKind> claimed_;
  size_t minBytes_ = 0;
};

}  // namespace hc::transport
