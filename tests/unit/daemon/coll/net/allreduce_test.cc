// Allreduce among simulated daemons: every algorithm (forced, and Auto), every reduction
// operator, node counts 1-8 (powers of two and not, for the recursive-doubling fold-in), uneven
// counts, and two pipelines: the default chunks, and tiny chunks with a small window so that
// every step runs many chunks and the windows fill. Every node must end with exactly the
// reference bytes, so every node also agrees with every other bit for bit.
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

using ::testing::Combine;
using ::testing::Values;
using ::testing::ValuesIn;

struct AllreduceCase {
  size_t nodes;
  AllreduceAlgo algo;
  uint8_t dtype;
  uint8_t op;
  size_t count;
  Pipeline pipeline;
};

std::string describe(const AllreduceCase& c) {
  return std::to_string(c.nodes) + " nodes, " + allreduceAlgoName(c.algo) + ", " +
         dtypeLabel(c.dtype) + " " + opLabel(c.op) + ", count " + std::to_string(c.count) + ", " +
         c.pipeline.name;
}

// Skips narrow floats while reduce.h does not implement them (it is being extended).
bool reductionAvailable(uint8_t dtype, std::string* why) {
  Status status = checkReduction(dtype, kSum);
  if (!status.isOk()) *why = status.message();
  return status.isOk();
}

// Runs one allreduce on a fresh cluster and checks every node's buffer and guard zones.
void runAllreduce(const AllreduceCase& c) {
  SCOPED_TRACE(describe(c));
  Cluster cluster(c.nodes);
  const size_t elementBytes = sizeOf(c.dtype);
  const uint64_t divisor = 2 * c.nodes + 1;  // as if some nodes hosted several ranks
  std::vector<Contribution> inputs;
  std::vector<Guarded> buffers;
  std::vector<NetOpSpec> specs;
  buffers.reserve(c.nodes);
  for (size_t node = 0; node < c.nodes; ++node) {
    inputs.push_back(randomValues(c.dtype, c.op, c.count, 1000 * node + 17 * c.count + c.op));
    buffers.emplace_back(c.count * elementBytes);
    buffers.back().assign(encode(c.dtype, inputs.back()));
    NetOpSpec spec = cluster.spec(node, NetOpKind::AllReduce);
    spec.dtype = Dtype{c.dtype};
    spec.redop = RedOp{c.op};
    spec.finalDivisor = c.op == kAvg ? divisor : 0;
    spec.count = c.count;
    spec.buffer = buffers.back().data();
    spec.options.allreduceAlgo = c.algo;
    applyPipeline(spec, c.pipeline);
    specs.push_back(spec);
  }
  std::vector<NetOpPtr> ops = makeOps(specs);
  ASSERT_EQ(ops.size(), c.nodes);
  const std::vector<Outcome> outcomes = cluster.run(raw(ops));

  const std::vector<uint8_t> want = reference(c.dtype, c.op, inputs, divisor);
  for (size_t node = 0; node < c.nodes; ++node) {
    ASSERT_TRUE(outcomes[node].status.isOk())
        << "node " << node << ": " << outcomes[node].status.toString();
    EXPECT_EQ(buffers[node].wrongElements(want, 0, elementBytes), 0u) << "node " << node;
    EXPECT_TRUE(buffers[node].guardsIntact()) << "node " << node;
  }
}

// ---- the grid: nodes x algorithm x dtype x pipeline; counts and operators inside ------------

class AllreduceTest
    : public ::testing::TestWithParam<std::tuple<size_t, AllreduceAlgo, uint8_t, Pipeline>> {};

TEST_P(AllreduceTest, EveryNodeHoldsTheReferenceResult) {
  const auto [nodes, algo, dtype, pipeline] = GetParam();
  std::string why;
  if (!reductionAvailable(dtype, &why)) GTEST_SKIP() << "reduce.h: " << why;
  for (size_t count : {0, 1, 7, 4097}) {
    for (uint8_t op : kAllOps) {
      runAllreduce(AllreduceCase{nodes, algo, dtype, op, count, pipeline});
      if (HasFatalFailure()) return;
    }
  }
}

std::string allreduceGridName(
    const ::testing::TestParamInfo<std::tuple<size_t, AllreduceAlgo, uint8_t, Pipeline>>& info) {
  const auto& [nodes, algo, dtype, pipeline] = info.param;
  return std::to_string(nodes) + "Nodes_" + allreduceAlgoName(algo) + "_" + dtypeLabel(dtype) +
         "_" + pipeline.name;
}

INSTANTIATE_TEST_SUITE_P(Grid, AllreduceTest,
                         Combine(Values(1, 2, 3, 4, 5, 8),
                                 Values(AllreduceAlgo::Auto, AllreduceAlgo::Ring,
                                        AllreduceAlgo::RecursiveDoubling),
                                 Values(kFloat32, kInt64, kFloat64, kFloat16, kBfloat16),
                                 Values(kDefaultPipeline, kTightPipeline)),
                         allreduceGridName);

// ---- large buffers: several default chunks per step -------------------------------------------

class AllreduceLargeTest
    : public ::testing::TestWithParam<std::tuple<size_t, AllreduceAlgo, uint8_t>> {};

std::string largeName(
    const ::testing::TestParamInfo<std::tuple<size_t, AllreduceAlgo, uint8_t>>& info) {
  const auto& [nodes, algo, dtype] = info.param;
  return std::to_string(nodes) + "Nodes_" + allreduceAlgoName(algo) + "_" + dtypeLabel(dtype);
}

TEST_P(AllreduceLargeTest, EveryNodeHoldsTheReferenceResult) {
  const auto [nodes, algo, dtype] = GetParam();
  std::string why;
  if (!reductionAvailable(dtype, &why)) GTEST_SKIP() << "reduce.h: " << why;
  runAllreduce(AllreduceCase{nodes, algo, dtype, kSum, (1u << 20) + 3, kDefaultPipeline});
}

INSTANTIATE_TEST_SUITE_P(OneMebiPlusThree, AllreduceLargeTest,
                         Combine(Values(3, 8),
                                 Values(AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling),
                                 Values(kFloat32, kInt64, kBfloat16)),
                         largeName);

TEST(AllreduceAvgTest, LargeAvgAndMaxMatchTheReference) {
  runAllreduce(
      AllreduceCase{5, AllreduceAlgo::Auto, kFloat64, kAvg, (1u << 20) + 3, kDefaultPipeline});
  runAllreduce(
      AllreduceCase{4, AllreduceAlgo::Auto, kInt64, kMax, (1u << 20) + 3, kDefaultPipeline});
}

// ---- bitwise agreement where the operator is not commutative in the bits ----------------------

// max(-0, +0) and min(-0, +0) depend on the operand order, and so does which NaN payload a sum
// keeps: every node must still end with the same bits as every other.
TEST(AllreduceAgreementTest, NodesAgreeOnSignedZerosAndNanPayloads) {
  struct Case {
    uint8_t op;
    bool nan;
  };
  for (size_t nodes : {2, 3, 4, 5, 8}) {
    for (AllreduceAlgo algo : {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling}) {
      for (Case c : {Case{kMax, false}, Case{kMin, false}, Case{kSum, true}}) {
        SCOPED_TRACE(std::to_string(nodes) + " nodes, " + allreduceAlgoName(algo) + ", " +
                     opLabel(c.op));
        const size_t count = 64;
        Cluster cluster(nodes);
        std::vector<std::vector<uint32_t>> buffers(nodes, std::vector<uint32_t>(count));
        std::vector<NetOpSpec> specs;
        for (size_t node = 0; node < nodes; ++node) {
          for (size_t j = 0; j < count; ++j) {
            // -0 or +0 by parity; or a quiet NaN whose payload names the node.
            buffers[node][j] = c.nan ? 0x7fc00000u | static_cast<uint32_t>(node + 1)
                                     : ((node + j) % 2 ? 0x80000000u : 0u);
          }
          NetOpSpec spec = cluster.spec(node, NetOpKind::AllReduce);
          spec.dtype = Dtype{kFloat32};
          spec.redop = RedOp{c.op};
          spec.count = count;
          spec.buffer = buffers[node].data();
          spec.options.allreduceAlgo = algo;
          specs.push_back(spec);
        }
        std::vector<NetOpPtr> ops = makeOps(specs);
        ASSERT_EQ(ops.size(), nodes);
        expectAllSucceeded(cluster.run(raw(ops)));
        for (size_t node = 1; node < nodes; ++node) {
          EXPECT_EQ(buffers[node], buffers[0]) << "node " << node << " disagrees with node 0";
        }
      }
    }
  }
}

// ---- threads: one per node, as on separate daemons ---------------------------------------------

TEST(AllreduceThreadedTest, NodesOnTheirOwnThreadsAgree) {
  for (AllreduceAlgo algo : {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling}) {
    SCOPED_TRACE(allreduceAlgoName(algo));
    const size_t nodes = 5, count = (1u << 18) + 3;
    Cluster cluster(nodes);
    std::vector<Contribution> inputs;
    std::vector<Guarded> buffers;
    std::vector<NetOpSpec> specs;
    buffers.reserve(nodes);
    for (size_t node = 0; node < nodes; ++node) {
      inputs.push_back(randomValues(kFloat32, kSum, count, node + 99));
      buffers.emplace_back(count * 4);
      buffers.back().assign(encode(kFloat32, inputs.back()));
      NetOpSpec spec = cluster.spec(node, NetOpKind::AllReduce);
      spec.dtype = Dtype{kFloat32};
      spec.redop = RedOp{kSum};
      spec.count = count;
      spec.buffer = buffers.back().data();
      spec.options.allreduceAlgo = algo;
      spec.options.chunkBytes = 64 * 1024;
      specs.push_back(spec);
    }
    std::vector<NetOpPtr> ops = makeOps(specs);
    ASSERT_EQ(ops.size(), nodes);
    const std::vector<Outcome> outcomes = cluster.runThreaded(raw(ops));
    const std::vector<uint8_t> want = reference(kFloat32, kSum, inputs, 1);
    for (size_t node = 0; node < nodes; ++node) {
      ASSERT_TRUE(outcomes[node].status.isOk()) << outcomes[node].status.toString();
      EXPECT_EQ(buffers[node].wrongElements(want, 0, 4), 0u) << "node " << node;
    }
  }
}

// ---- choice of algorithm ----------------------------------------------------------------------

TEST(AllreduceChoiceTest, AutoPicksRecursiveDoublingBelowTheThresholdAndRingFromIt) {
  Cluster cluster(3);
  std::vector<float> data(1024);
  NetOpSpec spec = cluster.spec(0, NetOpKind::AllReduce);
  spec.dtype = Dtype{kFloat32};
  spec.buffer = data.data();
  spec.options.ringMinBytes = 4096;
  spec.count = 1023;
  Result<NetOpPtr> small = makeNetOp(spec);
  ASSERT_TRUE(small.isOk());
  EXPECT_STREQ((*small)->algorithm(), "allreduce_recursive_doubling");
  spec.count = 1024;
  Result<NetOpPtr> large = makeNetOp(spec);
  ASSERT_TRUE(large.isOk());
  EXPECT_STREQ((*large)->algorithm(), "allreduce_ring");
  spec.options.allreduceAlgo = AllreduceAlgo::RecursiveDoubling;
  Result<NetOpPtr> forced = makeNetOp(spec);
  ASSERT_TRUE(forced.isOk());
  EXPECT_STREQ((*forced)->algorithm(), "allreduce_recursive_doubling");
}

TEST(AllreduceChoiceTest, ParsesTheAlgorithmNamesOfHcAlgo) {
  EXPECT_EQ(*parseAllreduceAlgo("auto"), AllreduceAlgo::Auto);
  EXPECT_EQ(*parseAllreduceAlgo("Ring"), AllreduceAlgo::Ring);
  EXPECT_EQ(*parseAllreduceAlgo("RD"), AllreduceAlgo::RecursiveDoubling);
  EXPECT_EQ(*parseAllreduceAlgo("recursive_doubling"), AllreduceAlgo::RecursiveDoubling);
  EXPECT_EQ(parseAllreduceAlgo("tree").status().code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc::coll::net::testing
