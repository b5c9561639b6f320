// buildRankTable on its own: joins of one node merge into one entry with its ranks ascending,
// nodes are ordered by their lowest rank, and neither the order of the joins nor how a node split
// its ranks among them changes the table. Links hc_peer_types only (no gRPC).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/peer/peer_types.h"

namespace hc::peer {
namespace {

// Any identity outside the reserved ones (transport.h).
constexpr uint64_t kTestIdentity = 0x5eed0000c0de0001ull;

JoinRequest joinOf(std::vector<uint32_t> ranks, const std::string& node, uint32_t nranks = 4) {
  JoinRequest join;
  join.nranks = nranks;
  join.ranks = std::move(ranks);
  join.node = {"host-" + node, "boot-" + node, "instance-" + node};
  join.transportAddress = "ucx-worker-of-" + node;
  return join;
}

std::vector<const JoinRequest*> pointersTo(const std::vector<JoinRequest>& joins) {
  std::vector<const JoinRequest*> out;
  for (const JoinRequest& j : joins) out.push_back(&j);
  return out;
}

// Node a holds ranks 0 and 2, node b ranks 1 and 3: a comes first (lowest rank 0).
RankTable twoByTwoTable() {
  RankTable table;
  table.nranks = 4;
  table.identity = kTestIdentity;
  table.nodes = {{joinOf({}, "a").node, "ucx-worker-of-a", {0, 2}},
                 {joinOf({}, "b").node, "ucx-worker-of-b", {1, 3}}};
  table.ranks = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  return table;
}

TEST(RankTableTest, OneJoinPerRankMergesPerNodeInAnyOrder) {
  std::vector<JoinRequest> joins = {joinOf({2}, "a"), joinOf({3}, "b"), joinOf({0}, "a"),
                                    joinOf({1}, "b")};
  std::vector<size_t> order = {0, 1, 2, 3};
  do {
    std::vector<const JoinRequest*> arrived;
    for (size_t i : order) arrived.push_back(&joins[i]);
    RankTable table = buildRankTable(4, arrived, kTestIdentity);
    EXPECT_EQ(table, twoByTwoTable());
    EXPECT_TRUE(validateRankTable(table).isOk()) << validateRankTable(table).toString();
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(RankTableTest, HowANodeSplitsItsRanksDoesNotMatter) {
  const std::vector<std::vector<JoinRequest>> splits = {
      {joinOf({2, 0}, "a"), joinOf({3, 1}, "b")},
      {joinOf({0, 2}, "a"), joinOf({1}, "b"), joinOf({3}, "b")},
      {joinOf({3}, "b"), joinOf({2}, "a"), joinOf({1}, "b"), joinOf({0}, "a")},
  };
  for (const std::vector<JoinRequest>& joins : splits) {
    EXPECT_EQ(buildRankTable(4, pointersTo(joins), kTestIdentity), twoByTwoTable());
  }
}

TEST(RankTableTest, NodesAreOrderedByTheirLowestRank) {
  // c brings the lowest rank in its second join; a's lowest is 1, b's 2.
  std::vector<JoinRequest> joins = {joinOf({4}, "c", 6), joinOf({1, 5}, "a", 6),
                                    joinOf({2, 3}, "b", 6), joinOf({0}, "c", 6)};
  RankTable table = buildRankTable(6, pointersTo(joins), kTestIdentity);
  ASSERT_EQ(table.nodes.size(), 3u);
  EXPECT_EQ(table.nodes[0].identity.hostname, "host-c");
  EXPECT_EQ(table.nodes[0].ranks, (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(table.nodes[1].ranks, (std::vector<uint32_t>{1, 5}));
  EXPECT_EQ(table.nodes[2].ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(table.ranks[4], (RankPlacement{0, 1}));
  EXPECT_EQ(table.ranks[5], (RankPlacement{1, 1}));
  EXPECT_TRUE(validateRankTable(table).isOk());
}

TEST(RankTableTest, IdentitiesDifferingInAnyFieldAreDifferentNodes) {
  JoinRequest a = joinOf({0}, "a", 3);
  JoinRequest otherBoot = joinOf({1}, "a", 3);
  otherBoot.node.bootId = "rebooted";
  otherBoot.transportAddress = "after-reboot";
  JoinRequest otherInstance = joinOf({2}, "a", 3);
  otherInstance.node.instance = "second-daemon";
  otherInstance.transportAddress = "second-daemon's";
  RankTable table = buildRankTable(3, {&a, &otherBoot, &otherInstance}, kTestIdentity);
  EXPECT_EQ(table.nodes.size(), 3u);
}

}  // namespace
}  // namespace hc::peer
