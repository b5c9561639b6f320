#include "tests/unit/daemon/coll/net/net_executor_harness.h"

#include <poll.h>

#include <algorithm>

namespace hc::coll::net::testing {

// ---- FreezableTransport ------------------------------------------------------------------------

bool FreezableTransport::freeze() {
  std::unique_lock<std::mutex> lock(mutex_);
  frozen_ = true;
  // The executor calls progress() at least every maxSleep (and every heartbeat interval).
  if (changed_.wait_for(lock, kDeadline, [this] { return parked_; })) return true;
  frozen_ = false;
  changed_.notify_all();
  return false;
}

void FreezableTransport::thaw() {
  std::lock_guard<std::mutex> lock(mutex_);
  frozen_ = false;
  changed_.notify_all();
}

size_t FreezableTransport::progress() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (frozen_) {
      parked_ = true;
      changed_.notify_all();
      changed_.wait(lock, [this] { return !frozen_; });
      parked_ = false;
    }
  }
  return inner_->progress();
}

// ---- options -----------------------------------------------------------------------------------

Result<size_t> finish(transport::Transport& t, transport::RequestId request) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    t.progress();
    size_t bytes = 0;
    Result<bool> done = t.test(request, &bytes);
    if (!done.isOk()) return done.status();
    if (*done) return bytes;
    pollfd p{t.eventFd(), POLLIN, 0};
    ::poll(&p, 1, 20);
  }
  return Status(Code::Timeout, "request never finished");
}

NetExecutorOptions testOptions() {
  NetExecutorOptions options;
  options.maxSleep = std::chrono::milliseconds(50);
  options.heartbeatInterval = std::chrono::milliseconds(20);
  options.silenceTimeout = std::chrono::milliseconds(3000);
  return options;
}

NetExecutorOptions silenceOptions() {
  NetExecutorOptions options = testOptions();
  options.silenceTimeout = std::chrono::milliseconds(300);
  return options;
}

// ---- ExecutorCluster ---------------------------------------------------------------------------

ExecutorCluster::ExecutorCluster(size_t nodes, NetExecutorOptions options) : results_(nodes) {
  for (size_t node = 0; node < nodes; ++node) {
    auto endpoint = fabric_.attach();
    HC_CHECK(endpoint.isOk());
    auto wrapped = std::make_unique<FreezableTransport>(std::move(endpoint.value()));
    FreezableTransport* raw = wrapped.get();
    Result<std::unique_ptr<NetExecutor>> executor = NetExecutor::start(std::move(wrapped), options);
    HC_CHECK(executor.isOk());
    transports_.push_back(raw);
    addresses_.push_back(executor.value()->address());
    executors_.push_back(std::move(executor.value()));
  }
}

ExecutorCluster::~ExecutorCluster() {
  for (FreezableTransport* transport : transports_) {
    if (transport != nullptr) transport->thaw();  // a frozen thread could never be joined
  }
  executors_.clear();  // before the fabric their endpoints borrow
}

NetJob ExecutorCluster::job(size_t node, uint64_t id, NetOpKind kind, uint64_t comm, uint64_t seq,
                            const std::vector<size_t>& members) const {
  std::vector<size_t> nodes = members;
  if (nodes.empty()) {
    for (size_t i = 0; i < size(); ++i) nodes.push_back(i);
  }
  NetJob job;
  job.id = id;
  job.spec.kind = kind;
  job.spec.comm = comm;
  job.spec.seq = seq;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == node) job.spec.self = static_cast<uint32_t>(i);
    job.nodes.push_back(addresses_.at(nodes[i]));
  }
  return job;
}

void ExecutorCluster::kill(size_t node) {
  HC_CHECK(fabric_.kill(transports_.at(node)->id()).isOk());
}

void ExecutorCluster::stop(size_t node) {
  if (transports_.at(node) != nullptr) transports_[node]->thaw();
  transports_[node] = nullptr;
  executors_.at(node)->stop();
}

void ExecutorCluster::destroy(size_t node) {
  if (transports_.at(node) != nullptr) transports_[node]->thaw();
  transports_[node] = nullptr;
  executors_.at(node).reset();
}

void ExecutorCluster::collect(size_t node) {
  for (NetJobResult& result : executors_.at(node)->takeResults()) {
    results_[node][result.id].push_back(std::move(result));
  }
}

Result<NetJobResult> ExecutorCluster::wait(size_t node, uint64_t id,
                                           std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    collect(node);
    auto it = results_[node].find(id);
    if (it != results_[node].end()) return it->second.front();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status(Code::Timeout, "no result for job " + std::to_string(id) + " on node " +
                                       std::to_string(node) + " within " +
                                       std::to_string(timeout.count()) + " ms");
    }
    pollfd p{executors_.at(node)->doneFd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 100)));
  }
}

size_t ExecutorCluster::resultCount(size_t node, uint64_t id) {
  collect(node);
  auto it = results_[node].find(id);
  return it == results_[node].end() ? 0 : it->second.size();
}

}  // namespace hc::coll::net::testing
