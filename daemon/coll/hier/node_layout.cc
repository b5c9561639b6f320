#include "daemon/coll/hier/node_layout.h"

#include <string>

namespace hc::coll::hier {

Result<NodeLayout> NodeLayout::make(uint32_t self, std::vector<std::vector<uint32_t>> ranksOfNode) {
  if (self >= ranksOfNode.size()) return invalidArgument("node layout: self is not a node");
  size_t nranks = 0;
  for (const auto& ranks : ranksOfNode) nranks += ranks.size();
  NodeLayout layout;
  layout.self = self;
  layout.nodeOfRank.assign(nranks, UINT32_MAX);
  layout.localOfRank.assign(nranks, 0);
  for (uint32_t n = 0; n < ranksOfNode.size(); ++n) {
    if (ranksOfNode[n].empty()) {
      return invalidArgument("node layout: node " + std::to_string(n) + " has no ranks");
    }
    for (uint32_t l = 0; l < ranksOfNode[n].size(); ++l) {
      const uint32_t r = ranksOfNode[n][l];
      if (r >= nranks || layout.nodeOfRank[r] != UINT32_MAX) {
        return invalidArgument("node layout: rank " + std::to_string(r) +
                               " is out of range or on two nodes");
      }
      layout.nodeOfRank[r] = n;
      layout.localOfRank[r] = l;
    }
  }
  layout.ranksOfNode = std::move(ranksOfNode);
  return layout;
}

bool NodeLayout::nodeOrderIsRankOrder() const {
  uint32_t next = 0;
  for (const auto& ranks : ranksOfNode) {
    for (uint32_t r : ranks) {
      if (r != next++) return false;
    }
  }
  return true;
}

uint64_t NodeLayout::nodeOffset(uint32_t node, uint64_t perRank) const {
  uint64_t before = 0;
  for (uint32_t n = 0; n < node; ++n) before += ranksOfNode[n].size();
  return before * perRank;
}

uint64_t NodeLayout::slotOf(uint32_t rank, uint64_t perRank) const {
  return nodeOffset(nodeOfRank[rank], perRank) + uint64_t{localOfRank[rank]} * perRank;
}

}  // namespace hc::coll::hier
