// End-to-end harness for NodePlan in one process: the ranks of a communicator placed over N
// simulated daemons ("nodes"), each rank with plain host buffers; every node's plan runs
// before(), the NetOps of all nodes run together over one loopback fabric (coll/net's Cluster),
// then after(). Each rank's memory keeps the image the test expects it to hold afterwards, so a
// check sees both a wrong result and a write outside the receive buffer.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/coll/hier/node_layout.h"
#include "daemon/coll/hier/node_plan.h"
#include "daemon/coll/local_plan.h"
#include "daemon/coll/net/net_op.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::hier::testing {

using Placement = std::vector<std::vector<uint32_t>>;  // ranksOfNode
using net::testing::Guarded;

struct NamedPlacement {
  const char* name;
  Placement ranksOfNode;
};

// Node order equals rank order in the first three; the last two interleave or reorder the nodes.
inline const NamedPlacement kPlacements[] = {
    {"OneRankPerNode", {{0}, {1}}},
    {"TwoAndTwo", {{0, 1}, {2, 3}}},
    {"TwoOneThree", {{0, 1}, {2}, {3, 4, 5}}},
    {"Interleaved", {{0, 2}, {1, 3}}},
    {"NotRankOrder", {{1}, {0, 2}}},
};

// Where one rank's send and receive buffers live. Absent buffers are null pointers (NCCL allows
// that for the buffers an operation does not use on this rank). In place, the smaller buffer
// sits `offset` elements into the larger (allgather: send = recv + rank * count).
struct BufferShape {
  bool hasSend = false;
  bool hasRecv = false;
  uint64_t sendElems = 0;
  uint64_t recvElems = 0;
  bool inPlace = false;
  uint64_t offset = 0;
};

// The first wrong element found, and how many there were.
struct Mismatch {
  size_t wrong = 0;
  std::string first;  // "<buffer> element i: got X, want Y"
};

// One rank's memory for one operation: `input` written at its send buffer, the fill byte
// everywhere else; the expected image starts as that and changes only where the test says.
class RankMemory {
 public:
  RankMemory(uint8_t dtype, const BufferShape& shape, const std::vector<uint8_t>& input,
             uint64_t scalar = 0);

  RankBuffers buffers() const { return RankBuffers{send_, recv_, scalar_}; }
  // The receive buffer must end holding `bytes` (from its start).
  void expectAtRecv(const std::vector<uint8_t>& bytes);
  // Compares every buffer, guard zones included, with the expected image.
  Mismatch compare() const;

 private:
  struct Region {
    const char* name;
    std::unique_ptr<Guarded> memory;
    std::vector<uint8_t> want;
  };

  uint8_t dtype_;
  std::vector<Region> regions_;  // send and recv, or one when in place
  const uint8_t* send_ = nullptr;
  uint8_t* recv_ = nullptr;
  size_t recvRegion_ = 0;
  size_t recvAt_ = 0;  // bytes into regions_[recvRegion_]
  bool inPlace_ = false;
  uint64_t scalar_ = 0;
};

// An element of dtype for failure messages: its value and its bits, "1.5 [0x3fc0]".
std::string showElement(uint8_t dtype, const uint8_t* bytes);

// Collects the outcome of many cases and reports them once: the number of wrong elements and of
// failed cases, and the first mismatch in full (operation, dtype, placement, rank, index, got,
// want). Cases whose run failed count as failed cases.
class Checker {
 public:
  void beginCase() { ++cases_; }
  void check(const std::string& label, int rank, const RankMemory& memory);
  void runFailed(const std::string& label);
  // Fails the test when any case failed.
  void report() const;

 private:
  size_t cases_ = 0;
  size_t badCases_ = 0;
  size_t wrongElements_ = 0;
  std::string lastBadCase_;
  std::string first_;
};

// What one node does in an operation: its op and its local ranks' buffers in local order
// (a send or receive: the one rank's). A node without work takes no part (send/recv).
struct NodeWork {
  LocalOp op;
  std::vector<RankBuffers> local;
};

// One placement's nodes: a layout each (checked at construction) and a scratch pool each that
// lives as long as this object, so later operations get blocks holding earlier ones' data.
class HierWorld {
 public:
  explicit HierWorld(const Placement& placement);

  size_t nodes() const { return layouts_.size(); }
  int nranks() const { return layouts_.empty() ? 0 : layouts_[0].nranks(); }
  const NodeLayout& layout(size_t node) const { return layouts_[node]; }
  uint32_t nodeOf(int rank) const { return layouts_[0].nodeOfRank[static_cast<size_t>(rank)]; }

  // Makes every working node's plan, calls before() on each, runs their NetOps together on a
  // fresh loopback cluster (spec() plus transport, peers, comm tag, seq and `options`) until all
  // are final, then calls after() on each. An error naming the node and the step when a plan or
  // an op failed; after() then runs on no node.
  [[nodiscard]] Status run(const std::vector<std::optional<NodeWork>>& work,
                           const net::NetOpOptions& options);
  // A collective: every node runs `op` over its local ranks, taken from `byRank`.
  [[nodiscard]] Status runCollective(const LocalOp& op, const std::vector<RankBuffers>& byRank,
                                     const net::NetOpOptions& options);

 private:
  std::vector<NodeLayout> layouts_;
  std::vector<std::unique_ptr<ScratchPool>> pools_;
};

}  // namespace hc::coll::hier::testing
