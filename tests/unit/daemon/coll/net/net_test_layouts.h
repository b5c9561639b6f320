// Shared by the collective tests: the pipelines of the grid, block layouts in which some nodes
// host two ranks, and a check that every node's op succeeded.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/coll/net/net_op.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"

namespace hc::coll::net::testing {

struct Pipeline {
  const char* name;
  size_t chunkBytes;
  size_t maxInFlight;
};
inline const Pipeline kDefaultPipeline{"DefaultChunks", kDefaultChunkBytes, kDefaultMaxInFlight};
inline const Pipeline kTightPipeline{"TinyChunks", 1000, 2};

inline void applyPipeline(NetOpSpec& spec, const Pipeline& pipeline) {
  spec.options.chunkBytes = pipeline.chunkBytes;
  spec.options.maxInFlight = pipeline.maxInFlight;
}

// Node i hosts 1 + i % 2 ranks of `count` elements each, so blocks differ in size. InNodeOrder
// leaves the offsets to their default (prefix sums); Reversed places the blocks in reverse node
// order with a 3-element gap after each, which the op must leave alone.
struct BlockLayout {
  std::vector<uint64_t> counts;
  std::vector<uint64_t> offsets;  // empty: prefix sums
  std::vector<uint64_t> at;       // the effective offsets
  uint64_t extent = 0;            // elements a buffer holds
};

inline BlockLayout blockLayout(size_t nodes, uint64_t count, bool reversed) {
  BlockLayout layout;
  layout.at.resize(nodes);
  for (size_t i = 0; i < nodes; ++i) layout.counts.push_back(count * (1 + i % 2));
  if (!reversed) {
    for (size_t i = 0; i < nodes; ++i) {
      layout.at[i] = layout.extent;
      layout.extent += layout.counts[i];
    }
    return layout;
  }
  for (size_t k = 0; k < nodes; ++k) {
    const size_t i = nodes - 1 - k;
    layout.at[i] = layout.extent;
    layout.extent += layout.counts[i] + 3;
  }
  layout.offsets = layout.at;
  return layout;
}

// Test names of the grids over (nodes, pipeline) and (nodes, pipeline, reversed layout).
inline std::string gridName(const ::testing::TestParamInfo<std::tuple<size_t, Pipeline>>& info) {
  return std::to_string(std::get<0>(info.param)) + "Nodes_" + std::get<1>(info.param).name;
}
inline std::string layoutGridName(
    const ::testing::TestParamInfo<std::tuple<size_t, Pipeline, bool>>& info) {
  return std::to_string(std::get<0>(info.param)) + "Nodes_" + std::get<1>(info.param).name +
         (std::get<2>(info.param) ? "_ReversedBlocks" : "_BlocksInNodeOrder");
}

inline void expectAllSucceeded(const std::vector<Outcome>& outcomes) {
  for (size_t node = 0; node < outcomes.size(); ++node) {
    EXPECT_TRUE(outcomes[node].status.isOk())
        << "node " << node << ": " << outcomes[node].status.toString();
  }
}

}  // namespace hc::coll::net::testing
