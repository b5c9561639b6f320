// NodeLayout: the rank tables make() refuses, the by-rank vectors it derives, whether node order
// is rank order, and the node-order offsets NodePlan stages through. NodePlan::make's refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "daemon/coll/hier/node_layout.h"
#include "daemon/coll/hier/node_plan.h"

namespace hc::coll::hier {
namespace {

using Placement = std::vector<std::vector<uint32_t>>;

void expectRefused(uint32_t self, const Placement& placement, const std::string& because) {
  Result<NodeLayout> layout = NodeLayout::make(self, placement);
  ASSERT_FALSE(layout.isOk()) << because;
  EXPECT_EQ(layout.status().code(), Code::InvalidArgument) << because;
  EXPECT_FALSE(layout.status().message().empty()) << because;
}

NodeLayout made(uint32_t self, const Placement& placement) {
  Result<NodeLayout> layout = NodeLayout::make(self, placement);
  EXPECT_TRUE(layout.isOk()) << layout.status().toString();
  return layout.isOk() ? std::move(layout.value()) : NodeLayout{};
}

TEST(NodeLayoutTest, RefusesARankOnTwoNodes) {
  expectRefused(0, {{0, 1}, {1, 2}}, "rank 1 on nodes 0 and 1 (rank 3 missing)");
  expectRefused(0, {{0, 0}}, "rank 0 twice on one node");
  expectRefused(1, {{1}, {0, 1}}, "rank 1 on nodes 0 and 1 (rank 2 missing)");
}

TEST(NodeLayoutTest, RefusesAMissingRank) {
  // Three entries promise ranks 0..2; rank 1 is missing, so another is out of range.
  expectRefused(0, {{0}, {2, 3}}, "rank 1 missing, rank 3 out of range");
  expectRefused(0, {{5}}, "rank 0 missing");
}

TEST(NodeLayoutTest, RefusesAnEmptyNode) {
  expectRefused(0, {{0}, {}}, "node 1 empty");
  expectRefused(1, {{0, 1}, {}, {2}}, "node 1 empty (self)");
  expectRefused(0, {{}}, "the only node empty");
}

TEST(NodeLayoutTest, RefusesASelfThatIsNotANode) {
  expectRefused(2, {{0}, {1}}, "self 2 of 2 nodes");
  expectRefused(0, {}, "no nodes at all");
}

TEST(NodeLayoutTest, DerivesNodeAndLocalIndexOfEveryRank) {
  const NodeLayout layout = made(1, {{1}, {0, 2}, {3}});
  EXPECT_EQ(layout.nranks(), 4);
  EXPECT_EQ(layout.nodes(), 3u);
  EXPECT_EQ(layout.localCount(), 2u);
  EXPECT_EQ(layout.nodeOfRank, (std::vector<uint32_t>{1, 0, 1, 2}));
  EXPECT_EQ(layout.localOfRank, (std::vector<uint32_t>{0, 0, 1, 0}));
  EXPECT_TRUE(layout.isLocal(0));
  EXPECT_FALSE(layout.isLocal(1));
  EXPECT_TRUE(layout.isLocal(2));
  EXPECT_FALSE(layout.isLocal(3));
}

TEST(NodeLayoutTest, NodeOrderIsRankOrderOnlyWhenRanksAreContiguousAndAscending) {
  EXPECT_TRUE(made(0, {{0}, {1}}).nodeOrderIsRankOrder());
  EXPECT_TRUE(made(0, {{0, 1}, {2, 3}}).nodeOrderIsRankOrder());
  EXPECT_TRUE(made(2, {{0, 1}, {2}, {3, 4, 5}}).nodeOrderIsRankOrder());
  EXPECT_TRUE(made(0, {{0, 1, 2}}).nodeOrderIsRankOrder());
  EXPECT_FALSE(made(0, {{0, 2}, {1, 3}}).nodeOrderIsRankOrder());
  EXPECT_FALSE(made(0, {{1}, {0, 2}}).nodeOrderIsRankOrder());
  EXPECT_FALSE(made(0, {{2, 3}, {0, 1}}).nodeOrderIsRankOrder());
}

TEST(NodeLayoutTest, SlotsFollowNodeOrderThenLocalOrder) {
  // Interleaved: node 0 = {0, 2}, node 1 = {1, 3}; 3 elements per rank.
  const NodeLayout inter = made(0, {{0, 2}, {1, 3}});
  EXPECT_EQ(inter.nodeOffset(0, 3), 0u);
  EXPECT_EQ(inter.nodeOffset(1, 3), 6u);
  EXPECT_EQ(inter.slotOf(0, 3), 0u);
  EXPECT_EQ(inter.slotOf(2, 3), 3u);
  EXPECT_EQ(inter.slotOf(1, 3), 6u);
  EXPECT_EQ(inter.slotOf(3, 3), 9u);
  // Not rank order: node 0 = {1}, node 1 = {0, 2}.
  const NodeLayout reordered = made(1, {{1}, {0, 2}});
  EXPECT_EQ(reordered.slotOf(1, 5), 0u);
  EXPECT_EQ(reordered.slotOf(0, 5), 5u);
  EXPECT_EQ(reordered.slotOf(2, 5), 10u);
  EXPECT_EQ(reordered.nodeOffset(1, 5), 5u);
  // Rank order: slot = rank * perRank; zero elements per rank puts every slot at 0.
  const NodeLayout ordered = made(2, {{0, 1}, {2}, {3, 4, 5}});
  for (uint32_t r = 0; r < 6; ++r) {
    EXPECT_EQ(ordered.slotOf(r, 7), uint64_t{r} * 7) << "rank " << r;
    EXPECT_EQ(ordered.slotOf(r, 0), 0u) << "rank " << r;
  }
  EXPECT_EQ(ordered.nodeOffset(2, 7), 21u);
}

TEST(NodePlanMakeTest, RefusesBuffersThatDoNotMatchTheLocalRanks) {
  const NodeLayout layout = made(0, {{0, 1}, {2}});
  ScratchPool pool;
  std::vector<uint8_t> a(4), b(4);
  const LocalOp allreduce{OpType::AllReduce, static_cast<Dtype>(7), static_cast<RedOp>(0), -1, 1};
  EXPECT_FALSE(NodePlan::make(allreduce, layout, {RankBuffers{a.data(), a.data()}}, &pool).isOk());
  const LocalOp send{OpType::Send, static_cast<Dtype>(7), static_cast<RedOp>(0), 2, 1};
  EXPECT_FALSE(NodePlan::make(send, layout,
                              {RankBuffers{a.data(), nullptr}, RankBuffers{b.data(), nullptr}},
                              &pool)
                   .isOk());
  EXPECT_TRUE(NodePlan::make(send, layout, {RankBuffers{a.data(), nullptr}}, &pool).isOk());
}

TEST(NodePlanMakeTest, RefusesOperationsThatDoNotSpanDaemons) {
  const NodeLayout layout = made(0, {{0}, {1}});
  ScratchPool pool;
  for (OpType type : {OpType::CommInit, OpType::CommSplit}) {
    Result<std::unique_ptr<NodePlan>> plan =
        NodePlan::make(LocalOp{type, Dtype{7}, RedOp{0}, -1, 0}, layout, {RankBuffers{}}, &pool);
    ASSERT_FALSE(plan.isOk()) << int(type);
    EXPECT_EQ(plan.status().code(), Code::InvalidArgument) << int(type);
  }
}

// Operands combined on a device reach the plan as one buffer that every local send points at:
// before() copies it into the node buffer (reducing it again would count it once per rank).
TEST(NodePlanMakeTest, CombinedLocalOperandsAreCopiedIntoTheNodeBufferNotReduced) {
  const NodeLayout layout = made(0, {{0, 1}, {2}});
  ScratchPool pool;
  constexpr uint8_t kInt32 = 2;
  constexpr uint8_t kSum = 0;
  const std::vector<int32_t> combined = {1, -2, 30, 4, 5, -6};
  std::vector<int32_t> recv0(6, 0), recv1(6, 0);
  auto buffers = [&] {
    const auto* send = reinterpret_cast<const uint8_t*>(combined.data());
    return std::vector<RankBuffers>{{send, reinterpret_cast<uint8_t*>(recv0.data())},
                                    {send, reinterpret_cast<uint8_t*>(recv1.data())}};
  };
  auto allreduce = NodePlan::make(
      {OpType::AllReduce, static_cast<Dtype>(kInt32), static_cast<RedOp>(kSum), -1, 6}, layout,
      buffers(), &pool, true);
  ASSERT_TRUE(allreduce.isOk()) << allreduce.status().toString();
  (*allreduce)->before();
  std::vector<int32_t> node(6);
  std::memcpy(node.data(), (*allreduce)->spec().buffer, sizeof(int32_t) * 6);
  EXPECT_EQ(node, combined);

  // Reduce-scatter of 2 elements per rank: block r of the combined buffer is rank r's slot (node
  // order is rank order here).
  auto scatter = NodePlan::make(
      {OpType::ReduceScatter, static_cast<Dtype>(kInt32), static_cast<RedOp>(kSum), -1, 2}, layout,
      buffers(), &pool, true);
  ASSERT_TRUE(scatter.isOk()) << scatter.status().toString();
  (*scatter)->before();
  std::memcpy(node.data(), (*scatter)->spec().buffer, sizeof(int32_t) * 6);
  EXPECT_EQ(node, combined);

  auto broadcast = NodePlan::make(
      {OpType::Broadcast, static_cast<Dtype>(kInt32), static_cast<RedOp>(kSum), 0, 6}, layout,
      buffers(), &pool, true);
  ASSERT_FALSE(broadcast.isOk()) << "only reductions combine their local operands";
}

}  // namespace
}  // namespace hc::coll::hier
