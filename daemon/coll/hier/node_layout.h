// NodeLayout: where the ranks of a communicator that spans daemons live. Node n hosts
// ranksOfNode[n] (its local ranks, ascending); this daemon is node `self`. Built from the rank
// table the root daemon sent (daemon/peer/peer_types.h), kept here as plain vectors so coll/
// stays free of the control plane.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace hc::coll::hier {

struct NodeLayout {
  uint32_t self = 0;
  std::vector<std::vector<uint32_t>> ranksOfNode;
  std::vector<uint32_t> nodeOfRank;   // by rank
  std::vector<uint32_t> localOfRank;  // by rank: its position in ranksOfNode[nodeOfRank[rank]]

  // Checks that every rank of [0, nranks) sits on exactly one node, and derives the by-rank
  // vectors. InvalidArgument naming the first problem.
  [[nodiscard]] static Result<NodeLayout> make(uint32_t self,
                                               std::vector<std::vector<uint32_t>> ranksOfNode);

  int nranks() const { return static_cast<int>(nodeOfRank.size()); }
  size_t nodes() const { return ranksOfNode.size(); }
  size_t localCount() const { return ranksOfNode[self].size(); }
  bool isLocal(int rank) const { return nodeOfRank[static_cast<size_t>(rank)] == self; }
  // True when listing the nodes' ranks in node order gives 0, 1, ..., nranks-1: then a buffer in
  // node order is also in rank order, and results can land in a rank's buffer directly.
  bool nodeOrderIsRankOrder() const;
  // Elements before node n's block in a node-order buffer of `perRank` elements per rank.
  uint64_t nodeOffset(uint32_t node, uint64_t perRank) const;
  // Elements before rank r's slot in such a buffer.
  uint64_t slotOf(uint32_t rank, uint64_t perRank) const;
};

}  // namespace hc::coll::hier
