// A cluster of NetExecutors for the executor tests: one loopback fabric, one executor (and so one
// progress thread) per simulated daemon, each endpoint wrapped in a FreezableTransport so that a
// test can stop a daemon the way SIGSTOP does. Every wait is bounded by a deadline and sleeps on
// the executors' done fds: a bug fails a test, never hangs it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/coll/net/net_executor.h"
#include "daemon/transport/loopback/loopback_transport.h"

namespace hc::coll::net::testing {

// The longest a test waits for something that should happen promptly.
constexpr std::chrono::milliseconds kDeadline{10000};

// A loopback endpoint whose owner can be frozen: while frozen, progress() blocks, so the thread
// that drives it (an executor's) stops dead, sending and reading nothing, while the endpoint stays
// open and its peers' sends still land in its queues: a stopped daemon whose kernel still ACKs.
// Every method forwards to the loopback endpoint (which any thread may call).
class FreezableTransport final : public transport::Transport {
 public:
  explicit FreezableTransport(std::unique_ptr<transport::LoopbackTransport> inner)
      : inner_(std::move(inner)) {}

  transport::PeerId id() const { return inner_->id(); }
  // Returns once the owner's thread is parked inside progress(); false when it did not get there
  // within kDeadline (then the transport is thawed again).
  bool freeze();
  void thaw();

  // hc::transport::Transport
  std::string_view name() const override { return "freezable-loopback"; }
  transport::PeerAddress address() const override { return inner_->address(); }
  Result<transport::PeerId> connect(const transport::PeerAddress& address) override {
    return inner_->connect(address);
  }
  Status disconnect(transport::PeerId peer) override { return inner_->disconnect(peer); }
  bool movesMemory(transport::MemoryKind kind) const override { return inner_->movesMemory(kind); }
  size_t directMinBytes() const override { return inner_->directMinBytes(); }
  using Transport::postRecv;
  using Transport::postSend;
  Result<transport::RequestId> postSend(transport::PeerId peer, transport::Tag tag, const void* buf,
                                        size_t bytes, transport::MemoryKind kind) override {
    return inner_->postSend(peer, tag, buf, bytes, kind);
  }
  Result<transport::RequestId> postRecv(transport::PeerId peer, transport::Tag tag, void* buf,
                                        size_t bytes, transport::MemoryKind kind) override {
    return inner_->postRecv(peer, tag, buf, bytes, kind);
  }
  using Transport::test;
  Result<bool> test(transport::RequestId request, size_t* bytes) override {
    return inner_->test(request, bytes);
  }
  size_t progress() override;
  Status cancel(transport::RequestId request) override { return inner_->cancel(request); }
  size_t dropUnexpected(
      const std::function<bool(const transport::UnexpectedMessage&)>& drop) override {
    return inner_->dropUnexpected(drop);
  }
  int eventFd() const override { return inner_->eventFd(); }
  void setPeerFailureHandler(PeerFailureHandler handler) override {
    inner_->setPeerFailureHandler(std::move(handler));
  }

 private:
  std::unique_ptr<transport::LoopbackTransport> inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool frozen_ = false;  // guarded by mutex_
  bool parked_ = false;  // guarded by mutex_
};

// Drives a bare endpoint (one a test plays a daemon with by hand) until `request` is final; its
// outcome, or Timeout after kDeadline.
Result<size_t> finish(transport::Transport& t, transport::RequestId request);

// Options for the tests: short sleeps and heartbeats; the silence check on, but far above any
// scheduling delay of a loaded 2-core machine, so that only a truly frozen peer trips it.
NetExecutorOptions testOptions();
// Fast silence detection, for the tests that freeze a daemon.
NetExecutorOptions silenceOptions();

class ExecutorCluster {
 public:
  explicit ExecutorCluster(size_t nodes, NetExecutorOptions options = testOptions());
  // Thaws every daemon, destroys the executors, then the fabric.
  ~ExecutorCluster();
  ExecutorCluster(const ExecutorCluster&) = delete;
  ExecutorCluster& operator=(const ExecutorCluster&) = delete;

  size_t size() const { return executors_.size(); }
  NetExecutor& at(size_t node) { return *executors_.at(node); }
  // Until stop(node) or destroy(node).
  FreezableTransport& transport(size_t node) { return *transports_.at(node); }
  const std::vector<transport::PeerAddress>& addresses() const { return addresses_; }
  transport::LoopbackFabric& fabric() { return fabric_; }

  // A job for `node` among `members` (node numbers of this cluster; empty: every node), its self
  // being node's index in members.
  NetJob job(size_t node, uint64_t id, NetOpKind kind, uint64_t comm, uint64_t seq,
             const std::vector<size_t>& members = {}) const;

  // Simulates the death of `node`'s daemon (LoopbackFabric::kill); its executor keeps running.
  void kill(size_t node);
  // Stops `node`'s executor (NetExecutor::stop(), which destroys its transport); its results stay.
  void stop(size_t node);
  // Destroys `node`'s executor, and with it its endpoint: to the others, the daemon exited.
  void destroy(size_t node);

  // The result of job `id` on `node`, waiting on the node's done fd for at most `timeout`;
  // Timeout when none came. Results taken meanwhile for other jobs are kept for their own wait().
  Result<NetJobResult> wait(size_t node, uint64_t id,
                            std::chrono::milliseconds timeout = kDeadline);
  // Takes whatever results are waiting now, then: how many results job `id` on `node` got so far.
  size_t resultCount(size_t node, uint64_t id);

 private:
  void collect(size_t node);

  transport::LoopbackFabric fabric_;  // first: the endpoints borrow it
  std::vector<std::unique_ptr<NetExecutor>> executors_;
  // Borrowed: each executor owns its transport until it stops; null from then on.
  std::vector<FreezableTransport*> transports_;
  std::vector<transport::PeerAddress> addresses_;
  std::vector<std::map<uint64_t, std::vector<NetJobResult>>> results_;  // per node, per job id
};

// Milliseconds since `start`.
inline int64_t msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

}  // namespace hc::coll::net::testing
