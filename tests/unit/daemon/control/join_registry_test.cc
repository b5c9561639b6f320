// The JoinRegistry's rules without gRPC: a daemon joins once per local rank, the root merges the
// joins of one node, retries replace, and conflicts fail whom they should. Joins are settled on
// the caller's thread (add() completes or refuses them), so most checks need no waiting.
#include "daemon/control/join_registry.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

using ::testing::HasSubstr;

// Each join's outcome, by the index join() returned.
class Outcomes {
 public:
  JoinDone slot(size_t index) {
    return [this, index](Result<peer::RankTable> result) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        HC_CHECK(!results_[index].has_value());  // exactly once
        results_[index] = std::move(result);
      }
      settled_.notify_all();
    };
  }
  size_t open() {
    std::lock_guard<std::mutex> lock(mutex_);
    results_.emplace_back();
    return results_.size() - 1;
  }
  bool settled(size_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return results_[index].has_value();
  }
  Result<peer::RankTable> result(size_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    HC_CHECK(results_[index].has_value());
    return *results_[index];
  }
  bool waitSettled(size_t index, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return settled_.wait_for(lock, timeout, [&] { return results_[index].has_value(); });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable settled_;
  std::vector<std::optional<Result<peer::RankTable>>> results_;
};

class JoinRegistryTest : public ::testing::Test {
 protected:
  // Adds `request`; returns its index into outcomes_ (and its ticket through `ticket`).
  size_t join(peer::JoinRequest request, JoinTicket* ticket = nullptr) {
    const size_t index = outcomes_.open();
    const JoinTicket t = registry_.newTicket();
    if (ticket != nullptr) *ticket = t;
    registry_.add(t, std::move(request), outcomes_.slot(index));
    return index;
  }

  // `want` with any identity; every joiner of a communicator gets the same one, and no two
  // communicators of this registry share one.
  void expectTable(size_t index, const peer::RankTable& want) {
    ASSERT_TRUE(outcomes_.settled(index)) << "join " << index << " is still pending";
    Result<peer::RankTable> r = outcomes_.result(index);
    ASSERT_TRUE(r.isOk()) << "join " << index << ": " << r.status().toString();
    const uint64_t identity = r.value().identity;
    EXPECT_GE(identity, transport::kFirstCommIdentity) << "join " << index;
    const std::string name = describeTable(want);
    auto [known, fresh] = identityOf_.try_emplace(name, identity);
    if (fresh) {
      EXPECT_TRUE(identities_.insert(identity).second) << "two communicators share an identity";
    } else {
      EXPECT_EQ(identity, known->second) << "join " << index << " got another identity";
    }
    peer::RankTable expected = want;
    expected.identity = identity;
    EXPECT_EQ(r.value(), expected) << "join " << index;
  }

  Outcomes outcomes_;  // before registry_: the registry's destructor settles pending joins
  JoinRegistry registry_;

 private:
  // A table's nodes and their transport addresses (which name the key in makeJoin's joins).
  static std::string describeTable(const peer::RankTable& table) {
    std::string text = std::to_string(table.nranks);
    for (const peer::NodeEntry& node : table.nodes) text += "|" + node.transportAddress;
    return text;
  }
  std::map<std::string, uint64_t> identityOf_;
  std::set<uint64_t> identities_;
};

// Two nodes, two ranks each: a holds 0 and 2, b holds 1 and 3. makeJoin gives every join of one
// node the same identity and transport address, as one daemon would.
std::vector<peer::JoinRequest> oneJoinPerRank(const peer::CommKey& key) {
  return {makeJoin(key, 4, {0}, "a"), makeJoin(key, 4, {1}, "b"), makeJoin(key, 4, {2}, "a"),
          makeJoin(key, 4, {3}, "b")};
}

peer::RankTable twoByTwoTable(const peer::CommKey& key) {
  const peer::JoinRequest a = makeJoin(key, 4, {}, "a");
  const peer::JoinRequest b = makeJoin(key, 4, {}, "b");
  peer::RankTable table;
  table.nranks = 4;
  table.nodes = {{a.node, a.transportAddress, {0, 2}}, {b.node, b.transportAddress, {1, 3}}};
  table.ranks = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  return table;
}

TEST_F(JoinRegistryTest, RanksJoiningOneAtATimeGetOneTableInEveryOrder) {
  std::vector<size_t> order = {0, 1, 2, 3};
  uint8_t seed = 0;
  do {
    const peer::CommKey key = keyOf(++seed);
    const std::vector<peer::JoinRequest> joins = oneJoinPerRank(key);
    std::vector<size_t> indices;
    for (size_t n = 0; n < order.size(); ++n) {
      indices.push_back(join(joins[order[n]]));
      if (n + 1 < order.size()) {
        EXPECT_FALSE(outcomes_.settled(indices.back())) << "formed before its last rank";
        EXPECT_EQ(registry_.joinedRanks(key).size(), n + 1);
      }
    }
    for (size_t index : indices) expectTable(index, twoByTwoTable(key));
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_F(JoinRegistryTest, SingleAndMultiRankJoinsOfOneNodeMerge) {
  const peer::CommKey key = keyOf(40);
  // a: rank 2 alone, then 0 alone; b: 3 and 1 in one join, in no particular order.
  size_t a2 = join(makeJoin(key, 4, {2}, "a"));
  size_t b = join(makeJoin(key, 4, {3, 1}, "b"));
  size_t a0 = join(makeJoin(key, 4, {0}, "a"));
  for (size_t index : {a2, b, a0}) expectTable(index, twoByTwoTable(key));
}

TEST_F(JoinRegistryTest, RetryOfOneRankReplacesOnlyItsEarlierJoin) {
  const peer::CommKey key = keyOf(41);
  size_t a0 = join(makeJoin(key, 4, {0}, "a"));
  size_t a2 = join(makeJoin(key, 4, {2}, "a"));
  size_t b1 = join(makeJoin(key, 4, {1}, "b"));
  size_t retry = join(makeJoin(key, 4, {2}, "a"));  // the reply to a2 was lost

  ASSERT_TRUE(outcomes_.settled(a2));
  EXPECT_EQ(outcomes_.result(a2).status().code(), Code::Unavailable);
  EXPECT_THAT(outcomes_.result(a2).status().message(), HasSubstr("superseded"));
  EXPECT_FALSE(outcomes_.settled(a0)) << "rank 0's join is not a retry of rank 2's";
  EXPECT_EQ(registry_.joinedRanks(key), (std::vector<uint32_t>{0, 1, 2}));

  size_t b3 = join(makeJoin(key, 4, {3}, "b"));
  for (size_t index : {a0, b1, retry, b3}) expectTable(index, twoByTwoTable(key));
}

TEST_F(JoinRegistryTest, RetryOfARankOfAMultiRankJoinReplacesThatWholeJoin) {
  const peer::CommKey key = keyOf(42);
  size_t pair = join(makeJoin(key, 4, {0, 2}, "a"));
  size_t retry = join(makeJoin(key, 4, {2}, "a"));
  ASSERT_TRUE(outcomes_.settled(pair));
  EXPECT_EQ(outcomes_.result(pair).status().code(), Code::Unavailable);
  EXPECT_EQ(registry_.joinedRanks(key), (std::vector<uint32_t>{2}))
      << "rank 0 left with the join that brought it";

  size_t a0 = join(makeJoin(key, 4, {0}, "a"));
  size_t b = join(makeJoin(key, 4, {1, 3}, "b"));
  for (size_t index : {retry, a0, b}) expectTable(index, twoByTwoTable(key));
}

TEST_F(JoinRegistryTest, SameRankFromTwoNodesFailsOnlyTheNewJoin) {
  const peer::CommKey key = keyOf(43);
  size_t a0 = join(makeJoin(key, 2, {0}, "a"));
  size_t b0 = join(makeJoin(key, 2, {0}, "b"));
  ASSERT_TRUE(outcomes_.settled(b0));
  const Status refused = outcomes_.result(b0).status();
  EXPECT_EQ(refused.code(), Code::InvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("duplicate rank 0"));
  EXPECT_THAT(refused.message(), HasSubstr("host-a/boot-a/instance-a"));
  EXPECT_THAT(refused.message(), HasSubstr("host-b/boot-b/instance-b"));
  EXPECT_FALSE(outcomes_.settled(a0));

  // Nothing of b stayed behind: b's real rank joins under b's identity and completes it.
  size_t b1 = join(makeJoin(key, 2, {1}, "b"));
  ASSERT_TRUE(outcomes_.result(a0).isOk()) << outcomes_.result(a0).status().toString();
  EXPECT_EQ(outcomes_.result(a0).value(), outcomes_.result(b1).value());
  EXPECT_EQ(outcomes_.result(a0)->nodes.size(), 2u);
}

TEST_F(JoinRegistryTest, DuplicateInsideAMultiRankJoinRefusesItWhole) {
  const peer::CommKey key = keyOf(44);
  join(makeJoin(key, 4, {1}, "b"));
  size_t a = join(makeJoin(key, 4, {0, 1}, "a"));
  EXPECT_EQ(outcomes_.result(a).status().code(), Code::InvalidArgument);
  EXPECT_EQ(registry_.joinedRanks(key), (std::vector<uint32_t>{1})) << "rank 0 did not stay";
}

TEST_F(JoinRegistryTest, TransportAddressDisagreementFailsEveryJoiner) {
  const peer::CommKey key = keyOf(45);
  size_t a0 = join(makeJoin(key, 3, {0}, "a"));
  size_t b1 = join(makeJoin(key, 3, {1}, "b"));
  peer::JoinRequest impostor = makeJoin(key, 3, {2}, "a");
  impostor.transportAddress = "another-ucx-worker";
  size_t a2 = join(impostor);
  for (size_t index : {a0, b1, a2}) {
    ASSERT_TRUE(outcomes_.settled(index)) << "join " << index;
    const Status s = outcomes_.result(index).status();
    EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
    EXPECT_THAT(s.message(), HasSubstr("node host-a/boot-a/instance-a"));
    EXPECT_THAT(s.message(), HasSubstr("transport address"));
  }
  EXPECT_TRUE(registry_.joinedRanks(key).empty());

  size_t late = join(makeJoin(key, 3, {2}, "a"));
  EXPECT_EQ(outcomes_.result(late).status().code(), Code::InvalidArgument);
  EXPECT_THAT(outcomes_.result(late).status().message(), HasSubstr("already failed"));
}

// A shrink's survivors join with a digest of their exclude list: one that differs fails every
// joiner of the key, as an nranks mismatch does, and a join that repeats it succeeds alongside.
TEST_F(JoinRegistryTest, AgreementDisagreementFailsEveryJoiner) {
  const peer::CommKey key = keyOf(46);
  peer::JoinRequest first = makeJoin(key, 3, {0}, "a");
  first.agreement = 0x1234;
  peer::JoinRequest same = makeJoin(key, 3, {1}, "b");
  same.agreement = 0x1234;
  peer::JoinRequest other = makeJoin(key, 3, {2}, "b");
  other.agreement = 0x5678;
  size_t a0 = join(first);
  size_t b1 = join(same);
  EXPECT_FALSE(outcomes_.settled(a0));
  EXPECT_FALSE(outcomes_.settled(b1));
  size_t b2 = join(other);
  for (size_t index : {a0, b1, b2}) {
    ASSERT_TRUE(outcomes_.settled(index)) << "join " << index;
    const Status s = outcomes_.result(index).status();
    EXPECT_EQ(s.code(), Code::InvalidArgument) << s.toString();
    EXPECT_THAT(s.message(), HasSubstr("exclude list"));
  }
  EXPECT_TRUE(registry_.joinedRanks(key).empty());
}

// The replaced join is gone, so it is not a second address: a node whose only join is retried
// from a new UCX worker (its daemon restarted) may bring the new address.
TEST_F(JoinRegistryTest, RetryMayChangeTheAddressOfANodeWithNoOtherJoin) {
  const peer::CommKey key = keyOf(46);
  size_t first = join(makeJoin(key, 2, {0}, "a"));
  peer::JoinRequest restarted = makeJoin(key, 2, {0}, "a");
  restarted.transportAddress = "new-ucx-worker";
  size_t retry = join(restarted);
  EXPECT_EQ(outcomes_.result(first).status().code(), Code::Unavailable);
  size_t b = join(makeJoin(key, 2, {1}, "b"));
  ASSERT_TRUE(outcomes_.result(retry).isOk()) << outcomes_.result(retry).status().toString();
  EXPECT_EQ(outcomes_.result(retry)->nodes[0].transportAddress, "new-ucx-worker");
  EXPECT_EQ(outcomes_.result(retry).value(), outcomes_.result(b).value());
}

TEST_F(JoinRegistryTest, WithdrawnRankLeavesItsNodeAndCanJoinAgain) {
  const peer::CommKey key = keyOf(47);
  JoinTicket ticket = 0;
  size_t a0 = join(makeJoin(key, 3, {0}, "a"), &ticket);
  size_t a1 = join(makeJoin(key, 3, {1}, "a"));
  EXPECT_TRUE(registry_.withdraw(key, ticket));
  EXPECT_FALSE(registry_.withdraw(key, ticket));
  EXPECT_FALSE(outcomes_.settled(a0)) << "a withdrawn join is settled by its owner";
  EXPECT_EQ(registry_.joinedRanks(key), (std::vector<uint32_t>{1}));

  size_t again = join(makeJoin(key, 3, {0}, "a"));
  size_t b2 = join(makeJoin(key, 3, {2}, "b"));
  ASSERT_TRUE(outcomes_.result(a1).isOk()) << outcomes_.result(a1).status().toString();
  EXPECT_EQ(outcomes_.result(a1)->nodes[0].ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(outcomes_.result(a1).value(), outcomes_.result(again).value());
  EXPECT_EQ(outcomes_.result(a1).value(), outcomes_.result(b2).value());
}

TEST_F(JoinRegistryTest, DeadlineCountsNodesNotJoins) {
  const peer::CommKey key = keyOf(48);
  peer::JoinRequest a0 = makeJoin(key, 3, {0}, "a");
  a0.timeout = 50ms;
  size_t first = join(a0);
  size_t second = join(makeJoin(key, 3, {1}, "a"));
  ASSERT_TRUE(outcomes_.waitSettled(first, 10s));
  ASSERT_TRUE(outcomes_.waitSettled(second, 10s));
  for (size_t index : {first, second}) {
    const Status s = outcomes_.result(index).status();
    EXPECT_EQ(s.code(), Code::Timeout) << s.toString();
    EXPECT_THAT(s.message(), HasSubstr("waiting for ranks 2"));
    EXPECT_THAT(s.message(), HasSubstr("ranks joined: 2 of 3; nodes joined: 1"));
  }
}

// A joiner's timeout is honoured up to the root's maxTimeout (the daemon's comm.init_timeout_ms):
// a join asking for an hour at a root that allows 100 ms fails at 100 ms.
TEST(JoinRegistryCapTest, AJoinersTimeoutIsCappedByTheRoot) {
  JoinRegistryOptions options;
  options.maxTimeout = 100ms;
  JoinRegistry registry(options);
  Outcomes outcomes;
  peer::JoinRequest request = makeJoin(keyOf(49), 2, {0}, "a");
  request.timeout = std::chrono::hours(1);
  const size_t index = outcomes.open();
  const auto start = std::chrono::steady_clock::now();
  registry.add(registry.newTicket(), std::move(request), outcomes.slot(index));
  ASSERT_TRUE(outcomes.waitSettled(index, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(outcomes.result(index).status().code(), Code::Timeout);
}

// The first join of a key opens it; a node may have at most maxPendingCommsPerNode open at once,
// and the root maxPendingComms in all. Joins into a communicator another node opened take no slot,
// and a slot comes back when its communicator forms.
TEST(JoinRegistryCapTest, OneNodeCannotTakeEverySlot) {
  JoinRegistryOptions options;
  options.maxPendingComms = 5;
  options.maxPendingCommsPerNode = 3;
  Outcomes outcomes;  // before the registry, whose destructor settles the pending joins
  JoinRegistry registry(options);
  auto join = [&](uint8_t seed, uint32_t rank, const std::string& node) {
    const size_t index = outcomes.open();
    registry.add(registry.newTicket(), makeJoin(keyOf(seed), 2, {rank}, node),
                 outcomes.slot(index));
    return index;
  };
  for (uint8_t seed = 60; seed < 63; ++seed) EXPECT_FALSE(outcomes.settled(join(seed, 0, "a")));
  const size_t fourthOfA = join(63, 0, "a");
  ASSERT_TRUE(outcomes.settled(fourthOfA));
  EXPECT_EQ(outcomes.result(fourthOfA).status().code(), Code::NoResource);
  EXPECT_THAT(outcomes.result(fourthOfA).status().message(),
              HasSubstr("the most one node may open at once; retry later"));
  EXPECT_TRUE(registry.joinedRanks(keyOf(63)).empty()) << "a refused join leaves nothing behind";

  for (uint8_t seed = 70; seed < 72; ++seed) EXPECT_FALSE(outcomes.settled(join(seed, 0, "b")));
  const size_t overTheRoot = join(72, 0, "c");
  ASSERT_TRUE(outcomes.settled(overTheRoot));
  EXPECT_EQ(outcomes.result(overTheRoot).status().code(), Code::NoResource);
  EXPECT_THAT(outcomes.result(overTheRoot).status().message(),
              HasSubstr("5 communicators forming"));

  // b completes one of a's communicators: it forms, and a may open another.
  const size_t completing = join(60, 1, "b");
  ASSERT_TRUE(outcomes.settled(completing));
  EXPECT_TRUE(outcomes.result(completing).isOk())
      << outcomes.result(completing).status().toString();
  EXPECT_FALSE(outcomes.settled(join(64, 0, "a")));
}

// Resident memory of this process, from /proc/self/status.
size_t residentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  HC_CHECK(f != nullptr);
  char line[256];
  size_t kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib * 1024;
}

// A pending communicator costs what its joins brought, not what its nranks announces: 256 of
// them announced with the most ranks a join may name (2^20), each with one rank joined, take a
// few MiB (a table by rank would take 8 MiB each, 2 GiB in all).
TEST(JoinRegistryCapTest, AnnouncedRanksCostNothingUntilTheyJoin) {
  JoinRegistryOptions options;
  options.maxPendingComms = 1024;
  options.maxPendingCommsPerNode = 1024;
  Outcomes outcomes;  // before the registry, whose destructor settles the pending joins
  JoinRegistry registry(options);
  const size_t before = residentBytes();
  for (int seed = 0; seed < 256; ++seed) {
    const size_t index = outcomes.open();
    registry.add(
        registry.newTicket(),
        makeJoin(keyOf(static_cast<uint8_t>(seed)), peer::kMaxRanks, {peer::kMaxRanks - 1}, "a"),
        outcomes.slot(index));
    ASSERT_FALSE(outcomes.settled(index)) << outcomes.result(index).status().toString();
  }
  const size_t grown = residentBytes() - std::min(before, residentBytes());
  EXPECT_LT(grown, size_t{64} << 20)
      << "256 pending communicators took " << (grown >> 20) << " MiB";
  EXPECT_EQ(registry.joinedRanks(keyOf(7)), (std::vector<uint32_t>{peer::kMaxRanks - 1}));
}

}  // namespace
}  // namespace hc::control::testing
