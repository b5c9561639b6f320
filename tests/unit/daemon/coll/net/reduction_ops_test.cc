// Reduce-scatter (ring, over node blocks of uneven size) and reduce (chain, to every kind of
// root) among simulated daemons: every operator, uneven counts, both pipelines. The node that
// owns a result must hold exactly the reference bytes.
#include <gtest/gtest.h>

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

const uint8_t kReductionDtypes[] = {kFloat32, kInt64, kBfloat16};
const size_t kCounts[] = {0, 1, 7, 4097};

class ReduceScatterTest : public ::testing::TestWithParam<std::tuple<size_t, Pipeline, bool>> {
 protected:
  size_t nodes() const { return std::get<0>(GetParam()); }
  const Pipeline& pipeline() const { return std::get<1>(GetParam()); }
  bool reversedLayout() const { return std::get<2>(GetParam()); }
};

TEST_P(ReduceScatterTest, EachNodeHoldsTheReductionOfItsBlock) {
  const size_t n = nodes();
  for (uint8_t dtype : kReductionDtypes) {
    if (!checkReduction(dtype, kSum).isOk()) continue;  // narrow floats: see AllreduceTest
    const size_t elementBytes = sizeOf(dtype);
    for (size_t count : kCounts) {
      for (uint8_t op : kAllOps) {
        SCOPED_TRACE(dtypeLabel(dtype) + " " + opLabel(op) + " count " + std::to_string(count));
        const BlockLayout layout = blockLayout(n, count, reversedLayout());
        const uint64_t divisor = 3 * n;
        Cluster cluster(n);
        std::vector<Contribution> inputs;
        std::vector<Guarded> buffers;
        std::vector<NetOpSpec> specs;
        buffers.reserve(n);
        for (size_t node = 0; node < n; ++node) {
          inputs.push_back(randomValues(dtype, op, layout.extent, 31 * node + count + op));
          buffers.emplace_back(layout.extent * elementBytes);
          buffers.back().assign(encode(dtype, inputs.back()));
          NetOpSpec spec = cluster.spec(node, NetOpKind::ReduceScatter);
          spec.dtype = Dtype{dtype};
          spec.redop = RedOp{op};
          spec.finalDivisor = op == kAvg ? divisor : 0;
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
          // The reference of this node's block, from every node's values there.
          std::vector<Contribution> block;
          for (const Contribution& in : inputs) {
            block.emplace_back(in.begin() + layout.at[node],
                               in.begin() + layout.at[node] + layout.counts[node]);
          }
          const std::vector<uint8_t> want = reference(dtype, op, block, divisor);
          EXPECT_EQ(buffers[node].wrongElements(want, layout.at[node] * elementBytes, elementBytes),
                    0u)
              << "node " << node;
          EXPECT_TRUE(buffers[node].guardsIntact()) << "node " << node;
        }
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, ReduceScatterTest,
                         Combine(Values(1, 2, 3, 4, 5, 8), Values(kDefaultPipeline, kTightPipeline),
                                 Bool()),
                         layoutGridName);

class ReduceTest : public ::testing::TestWithParam<std::tuple<size_t, Pipeline>> {};

TEST_P(ReduceTest, RootHoldsTheReduction) {
  const auto& [n, pipeline] = GetParam();
  for (uint8_t dtype : kReductionDtypes) {
    if (!checkReduction(dtype, kSum).isOk()) continue;
    const size_t elementBytes = sizeOf(dtype);
    for (uint32_t root : {size_t{0}, n / 2, n - 1}) {
      for (size_t count : kCounts) {
        for (uint8_t op : kAllOps) {
          SCOPED_TRACE(dtypeLabel(dtype) + " " + opLabel(op) + " count " + std::to_string(count) +
                       " root " + std::to_string(root));
          const uint64_t divisor = n;
          Cluster cluster(n);
          std::vector<Contribution> inputs;
          std::vector<Guarded> buffers;
          std::vector<NetOpSpec> specs;
          buffers.reserve(n);
          for (size_t node = 0; node < n; ++node) {
            inputs.push_back(randomValues(dtype, op, count, 77 * node + count + op));
            buffers.emplace_back(count * elementBytes);
            buffers.back().assign(encode(dtype, inputs.back()));
            NetOpSpec spec = cluster.spec(node, NetOpKind::Reduce);
            spec.dtype = Dtype{dtype};
            spec.redop = RedOp{op};
            spec.finalDivisor = op == kAvg ? divisor : 0;
            spec.root = root;
            spec.count = count;
            spec.buffer = buffers.back().data();
            applyPipeline(spec, pipeline);
            specs.push_back(spec);
          }
          std::vector<NetOpPtr> ops = makeOps(specs);
          ASSERT_EQ(ops.size(), n);
          expectAllSucceeded(cluster.run(raw(ops)));
          const std::vector<uint8_t> want = reference(dtype, op, inputs, divisor);
          EXPECT_EQ(buffers[root].wrongElements(want, 0, elementBytes), 0u);
          for (const Guarded& buffer : buffers) EXPECT_TRUE(buffer.guardsIntact());
          if (HasFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, ReduceTest,
                         Combine(Values(1, 2, 3, 4, 5, 8),
                                 Values(kDefaultPipeline, kTightPipeline)),
                         gridName);

}  // namespace
}  // namespace hc::coll::net::testing
