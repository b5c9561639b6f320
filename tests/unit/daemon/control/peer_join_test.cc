// The Peer bootstrap when it goes well: every joiner gets the same, complete rank table, whatever
// the order of arrival, and communicators forming at one root do not mix.
#include <algorithm>
#include <future>

#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

// Four nodes, eight ranks, each node bringing its ranks in one join, in no particular order.
struct FourNodeJob {
  peer::CommKey key;
  std::vector<peer::JoinRequest> joins;

  explicit FourNodeJob(uint8_t seed) : key(keyOf(seed)) {
    joins.push_back(makeJoin(key, 8, {3, 0}, "a"));
    joins.push_back(makeJoin(key, 8, {1, 5}, "b"));
    joins.push_back(makeJoin(key, 8, {7, 4}, "c"));
    joins.push_back(makeJoin(key, 8, {2, 6}, "d"));
  }
};

// Checks the table against the joins: nodes ordered by their lowest rank (a: 0, b: 1, d: 2,
// c: 4), each node's ranks ascending, a rank's local rank its position among them.
void expectFourNodeTable(const FourNodeJob& job, const peer::RankTable& table) {
  ASSERT_EQ(table.nranks, 8u);
  ASSERT_EQ(table.nodes.size(), 4u);
  const std::vector<std::string> expectedOrder = {"host-a", "host-b", "host-d", "host-c"};
  for (size_t n = 0; n < 4; ++n) EXPECT_EQ(table.nodes[n].identity.hostname, expectedOrder[n]);
  for (const peer::JoinRequest& join : job.joins) {
    auto node = std::find_if(table.nodes.begin(), table.nodes.end(),
                             [&](const peer::NodeEntry& e) { return e.identity == join.node; });
    ASSERT_NE(node, table.nodes.end()) << join.node.toString();
    EXPECT_EQ(node->transportAddress, join.transportAddress);
    std::vector<uint32_t> sorted = join.ranks;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(node->ranks, sorted);
    const auto nodeIndex = static_cast<uint32_t>(node - table.nodes.begin());
    for (uint32_t local = 0; local < sorted.size(); ++local) {
      EXPECT_EQ(table.ranks[sorted[local]], (peer::RankPlacement{nodeIndex, local}))
          << "rank " << sorted[local];
    }
  }
}

class PeerJoinTest : public PeerFixture {};

TEST_F(PeerJoinTest, EveryJoinerGetsTheSameCompleteTable) {
  FourNodeJob job(1);
  Joiners joiners(root_, tokenPath_);
  for (const peer::JoinRequest& join : job.joins) joiners.start(join, Clock::now() + 20s);
  joiners.joinAll();
  for (size_t i = 0; i < joiners.size(); ++i) {
    ASSERT_TRUE(joiners.result(i).isOk()) << joiners.result(i).status().toString();
    EXPECT_EQ(joiners.result(i).value(), joiners.result(0).value()) << "joiner " << i;
  }
  expectFourNodeTable(job, joiners.result(0).value());
  EXPECT_TRUE(server_->registry().joinedRanks(job.key).empty()) << "formed, so no longer pending";
}

TEST_F(PeerJoinTest, SingleNodeCommunicatorFormsAtOnce) {
  peer::CommKey key = keyOf(2);
  Result<peer::RankTable> table =
      newClient()->join(root_, makeJoin(key, 2, {1, 0}, "solo"), Clock::now() + 20s);
  ASSERT_TRUE(table.isOk()) << table.status().toString();
  ASSERT_EQ(table->nodes.size(), 1u);
  EXPECT_EQ(table->nodes[0].ranks, (std::vector<uint32_t>{0, 1})) << "ascending, as joined or not";
  EXPECT_EQ(table->ranks[0], (peer::RankPlacement{0, 0}));
  EXPECT_EQ(table->ranks[1], (peer::RankPlacement{0, 1}));
}

// What a daemon does: one Join per local rank, all through its one PeerClient, with the node's
// identity and UCX address. Two daemons of two ranks each; every rank gets one merged table.
TEST_F(PeerJoinTest, OneJoinPerRankGivesEveryRankTheSameMergedTable) {
  const peer::CommKey key = keyOf(6);
  std::vector<std::promise<Result<peer::RankTable>>> answers(4);  // outlives the clients' callbacks
  std::unique_ptr<PeerClient> daemonA = newClient();
  std::unique_ptr<PeerClient> daemonB = newClient();
  auto joinRank = [&](PeerClient& daemon, uint32_t rank, const std::string& node) {
    daemon.joinAsync(
        root_, makeJoin(key, 4, {rank}, node), Clock::now() + 20s,
        [&answers, rank](Result<peer::RankTable> r) { answers[rank].set_value(std::move(r)); });
  };
  joinRank(*daemonB, 3, "b");
  joinRank(*daemonA, 0, "a");
  joinRank(*daemonA, 2, "a");
  joinRank(*daemonB, 1, "b");
  std::vector<Result<peer::RankTable>> tables;
  for (auto& answer : answers) tables.push_back(answer.get_future().get());
  for (size_t rank = 0; rank < tables.size(); ++rank) {
    ASSERT_TRUE(tables[rank].isOk()) << "rank " << rank << ": " << tables[rank].status().toString();
    EXPECT_EQ(tables[rank].value(), tables[0].value()) << "rank " << rank;
  }
  const peer::RankTable& table = tables[0].value();
  ASSERT_EQ(table.nodes.size(), 2u);
  EXPECT_EQ(table.nodes[0].identity.hostname, "host-a");
  EXPECT_EQ(table.nodes[0].ranks, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(table.nodes[1].ranks, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(table.ranks[2], (peer::RankPlacement{0, 1}));
  EXPECT_EQ(table.ranks[3], (peer::RankPlacement{1, 1}));
}

// Joins arrive strictly one after another in the order given (each joiner starts only once the
// root holds the previous ones); the table must not depend on it.
class PeerJoinOrderTest : public PeerFixture,
                          public ::testing::WithParamInterface<std::vector<int>> {};

TEST_P(PeerJoinOrderTest, TableDoesNotDependOnArrivalOrder) {
  FourNodeJob job(3);
  Joiners joiners(root_, tokenPath_);
  size_t joinedRanks = 0;
  for (int node : GetParam()) {
    joiners.start(job.joins[node], Clock::now() + 20s);
    joinedRanks += job.joins[node].ranks.size();
    if (joinedRanks < 8) awaitJoined(job.key, joinedRanks);
  }
  joiners.joinAll();
  for (size_t i = 0; i < joiners.size(); ++i) {
    ASSERT_TRUE(joiners.result(i).isOk()) << joiners.result(i).status().toString();
    expectFourNodeTable(job, joiners.result(i).value());
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, PeerJoinOrderTest,
                         ::testing::Values(std::vector<int>{0, 1, 2, 3},
                                           std::vector<int>{3, 2, 1, 0},
                                           std::vector<int>{2, 0, 3, 1},
                                           std::vector<int>{1, 3, 0, 2}));

TEST_F(PeerJoinTest, TwoCommunicatorsFormConcurrentlyWithoutMixing) {
  FourNodeJob first(4);
  FourNodeJob second(5);
  Joiners joiners(root_, tokenPath_);
  // Interleaved: a, a', b, b', ...
  for (size_t i = 0; i < first.joins.size(); ++i) {
    joiners.start(first.joins[i], Clock::now() + 20s);
    joiners.start(second.joins[i], Clock::now() + 20s);
  }
  joiners.joinAll();
  for (size_t i = 0; i < joiners.size(); ++i) {
    ASSERT_TRUE(joiners.result(i).isOk()) << joiners.result(i).status().toString();
    expectFourNodeTable(i % 2 == 0 ? first : second, joiners.result(i).value());
  }
  EXPECT_NE(joiners.result(0).value(), joiners.result(1).value());
}

}  // namespace
}  // namespace hc::control::testing
