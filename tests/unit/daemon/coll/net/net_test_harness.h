// A cluster of simulated daemons ("nodes") on one LoopbackFabric, for the NetOp tests: every
// node has an endpoint connected to every other, and ops run either round-robin on the test's
// thread (deterministic: round r gives every node one transport->progress() and one
// op->progress()) or one thread per node. Every run is bounded: a bug fails a test, never hangs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "daemon/coll/net/net_op.h"
#include "daemon/transport/loopback/loopback_transport.h"

namespace hc::coll::net::testing {

// How one node's op ended.
struct Outcome {
  Status status;      // Ok when progress() returned true; Timeout when it never became final
  size_t rounds = 0;  // the round in which it became final
};

class Cluster {
 public:
  explicit Cluster(size_t nodes);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  size_t size() const { return endpoints_.size(); }
  transport::LoopbackTransport& endpoint(size_t node) { return *endpoints_[node]; }

  // A spec for `node` with the transport, the PeerId of every node, self, comm and a sequence
  // number that is the same on every node for the k-th call with that node.
  NetOpSpec spec(size_t node, NetOpKind kind);

  // Simulates the death of `node`'s daemon (LoopbackFabric::kill).
  void kill(size_t node);

  // Starts every non-null op (in order) and drives them round-robin until each is final or
  // maxRounds have passed. ops[i] runs on node i % size(), so a list of 2 * size() ops runs two
  // ops on every node at once. A round gives every node one transport->progress() and then each
  // of its ops one progress(). beforeRound(r), when given, runs before round r (r = 1, 2, ...):
  // the place to kill a node or abort an op mid-flight. An op still not final at the end is
  // aborted and drained (so it may be destroyed) and its outcome is Timeout.
  std::vector<Outcome> run(const std::vector<NetOp*>& ops, size_t maxRounds = 200000,
                           const std::function<void(size_t round)>& beforeRound = {});
  // One op per node, each node on its own thread looping until its op is final (bounded).
  std::vector<Outcome> runThreaded(const std::vector<NetOp*>& ops);

 private:
  transport::LoopbackFabric fabric_;  // declared first: the endpoints borrow it
  std::vector<std::unique_ptr<transport::LoopbackTransport>> endpoints_;
  std::vector<uint32_t> nextSeq_;
};

// makeNetOp for every spec; fails the test (and returns empty) when one is refused.
std::vector<NetOpPtr> makeOps(const std::vector<NetOpSpec>& specs);
std::vector<NetOp*> raw(const std::vector<NetOpPtr>& ops);

}  // namespace hc::coll::net::testing
