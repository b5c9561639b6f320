// The collectives that move data without reducing it, among simulated daemons: allgather (ring),
// broadcast (chain), all-to-all (pairwise, uneven per-pair sizes), gather and scatter (direct),
// over block layouts where some nodes host two ranks, every root, uneven counts, both pipelines.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/reduce/reduce.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_layouts.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

using ::testing::Bool;
using ::testing::Combine;
using ::testing::Values;

const uint8_t kCopyDtypes[] = {kFloat32, kInt64, kBfloat16};
const size_t kCounts[] = {0, 1, 7, 4097};

// The bytes node `node` contributes to a block-layout op: distinct per node and dtype.
std::vector<uint8_t> blockBytes(uint8_t dtype, size_t node, uint64_t elements) {
  return encode(dtype, randomValues(dtype, kSum, elements, 5000 + 13 * node + elements));
}

class DataMovementTest : public ::testing::TestWithParam<std::tuple<size_t, Pipeline, bool>> {
 protected:
  size_t nodes() const { return std::get<0>(GetParam()); }
  const Pipeline& pipeline() const { return std::get<1>(GetParam()); }
  bool reversedLayout() const { return std::get<2>(GetParam()); }

  // One block-layout op on a fresh cluster: every node starts with its own block (and the root,
  // for scatter, with every block); checks every node against `expectBlock(node, block)`, which
  // says whether `node` must end holding `block`'s data.
  template <typename ExpectBlock>
  void runBlockOp(NetOpKind kind, uint32_t root, ExpectBlock expectBlock) {
    const size_t n = nodes();
    for (uint8_t dtype : kCopyDtypes) {
      const size_t elementBytes = sizeOf(dtype);
      for (size_t count : kCounts) {
        SCOPED_TRACE(std::string(netOpKindName(kind)) + " " + dtypeLabel(dtype) + " count " +
                     std::to_string(count) + " root " + std::to_string(root));
        const BlockLayout layout = blockLayout(n, count, reversedLayout());
        Cluster cluster(n);
        std::vector<Guarded> buffers;
        std::vector<NetOpSpec> specs;
        buffers.reserve(n);
        for (size_t node = 0; node < n; ++node) {
          buffers.emplace_back(layout.extent * elementBytes);
          for (size_t block = 0; block < n; ++block) {
            const bool holds = block == node || (kind == NetOpKind::Scatter && node == root);
            if (holds) {
              buffers.back().assign(blockBytes(dtype, block, layout.counts[block]),
                                    layout.at[block] * elementBytes);
            }
          }
          NetOpSpec spec = cluster.spec(node, kind);
          spec.dtype = Dtype{dtype};
          spec.root = root;
          spec.blockCounts = layout.counts;
          spec.blockOffsets = layout.offsets;
          spec.buffer = buffers.back().data();
          applyPipeline(spec, pipeline());
          specs.push_back(spec);
        }
        std::vector<NetOpPtr> ops = makeOps(specs);
        ASSERT_EQ(ops.size(), n);
        expectAllSucceeded(cluster.run(raw(ops)));
        for (size_t node = 0; node < n; ++node) {
          // The whole buffer: the expected blocks, and the fill everywhere else (gaps, blocks
          // this node neither held nor received).
          std::vector<uint8_t> want(layout.extent * elementBytes, Guarded::kFill);
          for (size_t block = 0; block < n; ++block) {
            if (!expectBlock(node, block)) continue;
            const std::vector<uint8_t> bytes = blockBytes(dtype, block, layout.counts[block]);
            std::copy(bytes.begin(), bytes.end(), want.begin() + layout.at[block] * elementBytes);
          }
          EXPECT_EQ(buffers[node].wrongElements(want, 0, elementBytes), 0u) << "node " << node;
          EXPECT_TRUE(buffers[node].guardsIntact()) << "node " << node;
        }
        if (HasFailure()) return;
      }
    }
  }
};

TEST_P(DataMovementTest, AllgatherGivesEveryNodeEveryBlock) {
  runBlockOp(NetOpKind::AllGather, 0, [](size_t, size_t) { return true; });
}

TEST_P(DataMovementTest, GatherGivesTheRootEveryBlock) {
  for (uint32_t root : {size_t{0}, nodes() - 1}) {
    runBlockOp(NetOpKind::Gather, root,
               [root](size_t node, size_t block) { return node == root || block == node; });
  }
}

TEST_P(DataMovementTest, ScatterGivesEveryNodeItsBlock) {
  for (uint32_t root : {size_t{0}, nodes() / 2}) {
    runBlockOp(NetOpKind::Scatter, root,
               [root](size_t node, size_t block) { return node == root || block == node; });
  }
}

TEST_P(DataMovementTest, AllToAllDeliversEveryPairsBlock) {
  const size_t n = nodes();
  for (size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    // Node s sends pairCount(s, d) elements to node d: uneven, and 0 when count is 0.
    auto pairCount = [count](size_t s, size_t d) -> uint64_t {
      return count == 0 ? 0 : count + (3 * s + d) % 5;
    };
    auto pairBytes = [&](size_t s, size_t d) {
      return encode(kFloat32, randomValues(kFloat32, kSum, pairCount(s, d), 100 * s + d));
    };
    Cluster cluster(n);
    std::vector<Guarded> sendBuffers, recvBuffers;
    std::vector<NetOpSpec> specs;
    sendBuffers.reserve(n);
    recvBuffers.reserve(n);
    for (size_t node = 0; node < n; ++node) {
      NetOpSpec spec = cluster.spec(node, NetOpKind::AllToAll);
      spec.dtype = Dtype{kFloat32};
      uint64_t sendTotal = 0, recvTotal = 0;
      for (size_t other = 0; other < n; ++other) {
        spec.sendCounts.push_back(pairCount(node, other));
        spec.blockCounts.push_back(pairCount(other, node));
        sendTotal += spec.sendCounts.back();
        recvTotal += spec.blockCounts.back();
      }
      // Reversed: sources' blocks land in reverse order (explicit offsets).
      std::vector<uint64_t> recvAt(n, 0);
      uint64_t next = 0;
      for (size_t k = 0; k < n; ++k) {
        const size_t source = reversedLayout() ? n - 1 - k : k;
        recvAt[source] = next;
        next += spec.blockCounts[source];
      }
      if (reversedLayout()) spec.blockOffsets = recvAt;
      sendBuffers.emplace_back(sendTotal * 4);
      recvBuffers.emplace_back(recvTotal * 4);
      uint64_t at = 0;
      for (size_t other = 0; other < n; ++other) {
        sendBuffers.back().assign(pairBytes(node, other), at * 4);
        at += spec.sendCounts[other];
      }
      spec.sendBuffer = sendBuffers.back().data();
      spec.buffer = recvBuffers.back().data();
      applyPipeline(spec, pipeline());
      specs.push_back(spec);
    }
    std::vector<NetOpPtr> ops = makeOps(specs);
    ASSERT_EQ(ops.size(), n);
    expectAllSucceeded(cluster.run(raw(ops)));
    for (size_t node = 0; node < n; ++node) {
      uint64_t next = 0;
      for (size_t k = 0; k < n; ++k) {
        const size_t source = reversedLayout() ? n - 1 - k : k;
        EXPECT_EQ(recvBuffers[node].wrongElements(pairBytes(source, node), next * 4, 4), 0u)
            << "node " << node << " from " << source;
        next += pairCount(source, node);
      }
      EXPECT_TRUE(recvBuffers[node].guardsIntact());
      EXPECT_TRUE(sendBuffers[node].guardsIntact());
    }
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, DataMovementTest,
                         Combine(Values(1, 2, 3, 4, 5, 8), Values(kDefaultPipeline, kTightPipeline),
                                 Bool()),
                         layoutGridName);

class BroadcastTest : public ::testing::TestWithParam<std::tuple<size_t, Pipeline>> {};

TEST_P(BroadcastTest, EveryNodeGetsTheRootsBuffer) {
  const auto& [n, pipeline] = GetParam();
  for (uint32_t root : {size_t{0}, n / 2, n - 1}) {
    for (size_t count : kCounts) {
      SCOPED_TRACE("root " + std::to_string(root) + " count " + std::to_string(count));
      Cluster cluster(n);
      const std::vector<uint8_t> data = blockBytes(kInt64, root, count);
      std::vector<Guarded> buffers;
      std::vector<NetOpSpec> specs;
      buffers.reserve(n);
      for (size_t node = 0; node < n; ++node) {
        buffers.emplace_back(data.size());
        if (node == root) buffers.back().assign(data);
        NetOpSpec spec = cluster.spec(node, NetOpKind::Broadcast);
        spec.dtype = Dtype{kInt64};
        spec.root = root;
        spec.count = count;
        spec.buffer = buffers.back().data();
        applyPipeline(spec, pipeline);
        specs.push_back(spec);
      }
      std::vector<NetOpPtr> ops = makeOps(specs);
      ASSERT_EQ(ops.size(), n);
      expectAllSucceeded(cluster.run(raw(ops)));
      for (size_t node = 0; node < n; ++node) {
        EXPECT_EQ(buffers[node].wrongElements(data, 0, 8), 0u) << "node " << node;
        EXPECT_TRUE(buffers[node].guardsIntact());
      }
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, BroadcastTest,
                         Combine(Values(1, 2, 3, 4, 5, 8),
                                 Values(kDefaultPipeline, kTightPipeline)),
                         gridName);

}  // namespace
}  // namespace hc::coll::net::testing
