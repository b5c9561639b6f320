#include "tests/unit/daemon/coll/net/net_test_harness.h"

#include <gtest/gtest.h>

#include <thread>

namespace hc::coll::net::testing {
namespace {

constexpr uint64_t kCommTag = 0x4e54;  // any identity; every node of a cluster uses the same
constexpr size_t kThreadedMaxIterations = 50'000'000;

}  // namespace

Cluster::Cluster(size_t nodes) : nextSeq_(nodes, 1) {
  for (size_t i = 0; i < nodes; ++i) {
    auto endpoint = fabric_.attach();
    HC_CHECK(endpoint.isOk());
    endpoints_.push_back(std::move(endpoint.value()));
  }
  for (auto& from : endpoints_) {
    for (auto& to : endpoints_) {
      if (from != to) HC_CHECK(from->connect(to->address()).isOk());
    }
  }
}

Cluster::~Cluster() { endpoints_.clear(); }  // before the fabric they borrow

NetOpSpec Cluster::spec(size_t node, NetOpKind kind) {
  NetOpSpec spec;
  spec.kind = kind;
  spec.transport = endpoints_[node].get();
  for (const auto& endpoint : endpoints_) spec.peers.push_back(endpoint->id());
  spec.self = static_cast<uint32_t>(node);
  spec.comm = kCommTag;
  spec.seq = nextSeq_[node]++;
  return spec;
}

void Cluster::kill(size_t node) { HC_CHECK(fabric_.kill(endpoints_[node]->id()).isOk()); }

std::vector<Outcome> Cluster::run(const std::vector<NetOp*>& ops, size_t maxRounds,
                                  const std::function<void(size_t)>& beforeRound) {
  const size_t n = size();
  std::vector<Outcome> outcomes(ops.size());
  std::vector<bool> final(ops.size(), false);
  size_t pending = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] == nullptr) {
      final[i] = true;
      continue;
    }
    ++pending;
    Status started = ops[i]->start();
    EXPECT_TRUE(started.isOk()) << "op " << i << ": " << started.toString();
  }
  for (size_t round = 1; round <= maxRounds && pending > 0; ++round) {
    if (beforeRound) beforeRound(round);
    for (size_t node = 0; node < n; ++node) {
      endpoints_[node]->progress();
      for (size_t i = node; i < ops.size(); i += n) {
        if (final[i]) continue;
        Result<bool> done = ops[i]->progress();
        if (done.isOk() && !*done) continue;
        outcomes[i] = Outcome{done.status(), round};
        final[i] = true;
        --pending;
      }
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (final[i]) continue;
    outcomes[i].status =
        Status(Code::Timeout, "never final after " + std::to_string(maxRounds) + " rounds");
    ops[i]->abort(Status(Code::Timeout, "test gave up"));
    for (int k = 0; k < 1000; ++k) {
      endpoints_[i % n]->progress();
      Result<bool> done = ops[i]->progress();
      if (!done.isOk() || *done) break;
    }
  }
  return outcomes;
}

std::vector<Outcome> Cluster::runThreaded(const std::vector<NetOp*>& ops) {
  std::vector<Outcome> outcomes(ops.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] == nullptr) continue;
    threads.emplace_back([this, &ops, &outcomes, i] {
      Status started = ops[i]->start();
      if (!started.isOk()) {
        outcomes[i].status = started;
        return;
      }
      for (size_t k = 1; k <= kThreadedMaxIterations; ++k) {
        // Nothing to do means another node's turn: give the core away (2 cores, many nodes).
        if (endpoints_[i]->progress() == 0) std::this_thread::yield();
        Result<bool> done = ops[i]->progress();
        if (done.isOk() && !*done) continue;
        outcomes[i] = Outcome{done.status(), k};
        return;
      }
      outcomes[i].status = Status(Code::Timeout, "never final");
      ops[i]->abort(Status(Code::Timeout, "test gave up"));
      for (int k = 0; k < 100000; ++k) {
        endpoints_[i]->progress();
        Result<bool> done = ops[i]->progress();
        if (!done.isOk() || *done) break;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return outcomes;
}

std::vector<NetOpPtr> makeOps(const std::vector<NetOpSpec>& specs) {
  std::vector<NetOpPtr> ops;
  for (const NetOpSpec& spec : specs) {
    Result<NetOpPtr> op = makeNetOp(spec);
    EXPECT_TRUE(op.isOk()) << "node " << spec.self << ": " << op.status().toString();
    if (!op.isOk()) return {};
    ops.push_back(std::move(op.value()));
  }
  return ops;
}

std::vector<NetOp*> raw(const std::vector<NetOpPtr>& ops) {
  std::vector<NetOp*> pointers;
  for (const NetOpPtr& op : ops) pointers.push_back(op.get());
  return pointers;
}

}  // namespace hc::coll::net::testing
