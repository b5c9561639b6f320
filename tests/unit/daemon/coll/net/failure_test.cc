// NetOps under failure: a node killed mid-operation, an op aborted mid-flight, nodes that
// disagree on the operation. Every op must end with an error within a bounded number of rounds
// (never hang), and only after the transport made each of its requests final (a destroyed op with
// pending requests is fatal, so a test that leaked one would crash).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/coll/net/op_notice.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_layouts.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

using ::testing::Combine;
using ::testing::Values;

constexpr size_t kElements = 8192;  // float32: 32 KiB per node
constexpr size_t kFailRound = 3;    // mid-flight: small chunks keep every op busy far longer
// A barrier is over within a few rounds: its node dies right after every node entered.
constexpr size_t kBarrierFailRound = 1;
const Pipeline kSlowPipeline{"SlowChunks", 1024, 2};

enum class Scenario {
  AllreduceRing,
  AllreduceRecursiveDoubling,
  ReduceScatter,
  Allgather,
  Broadcast,
  Reduce,
  AllToAll,
  GatherFromDeadRoot,
  ScatterFromDeadRoot,
  Barrier,
};

const char* scenarioName(Scenario s) {
  switch (s) {
    case Scenario::AllreduceRing:
      return "AllreduceRing";
    case Scenario::AllreduceRecursiveDoubling:
      return "AllreduceRecursiveDoubling";
    case Scenario::ReduceScatter:
      return "ReduceScatter";
    case Scenario::Allgather:
      return "Allgather";
    case Scenario::Broadcast:
      return "Broadcast";
    case Scenario::Reduce:
      return "Reduce";
    case Scenario::AllToAll:
      return "AllToAll";
    case Scenario::GatherFromDeadRoot:
      return "GatherFromDeadRoot";
    case Scenario::ScatterFromDeadRoot:
      return "ScatterFromDeadRoot";
    case Scenario::Barrier:
      return "Barrier";
  }
  return "unknown";
}

// Buffers and ops of one scenario on every node of a cluster; the node numbered `victim` is the
// root where the scenario has one.
struct Job {
  std::vector<std::vector<float>> send, recv;
  std::vector<NetOpPtr> ops;
};

Job makeJob(Cluster& cluster, Scenario scenario, uint32_t victim) {
  const size_t n = cluster.size();
  Job job;
  job.send.assign(n, std::vector<float>(kElements * n, 1.0f));
  job.recv.assign(n, std::vector<float>(kElements * n, 0.0f));
  std::vector<NetOpSpec> specs;
  for (size_t node = 0; node < n; ++node) {
    NetOpKind kind = NetOpKind::AllReduce;
    switch (scenario) {
      case Scenario::AllreduceRing:
      case Scenario::AllreduceRecursiveDoubling:
        kind = NetOpKind::AllReduce;
        break;
      case Scenario::ReduceScatter:
        kind = NetOpKind::ReduceScatter;
        break;
      case Scenario::Allgather:
        kind = NetOpKind::AllGather;
        break;
      case Scenario::Broadcast:
        kind = NetOpKind::Broadcast;
        break;
      case Scenario::Reduce:
        kind = NetOpKind::Reduce;
        break;
      case Scenario::AllToAll:
        kind = NetOpKind::AllToAll;
        break;
      case Scenario::GatherFromDeadRoot:
        kind = NetOpKind::Gather;
        break;
      case Scenario::ScatterFromDeadRoot:
        kind = NetOpKind::Scatter;
        break;
      case Scenario::Barrier:
        kind = NetOpKind::Barrier;
        break;
    }
    NetOpSpec spec = cluster.spec(node, kind);
    spec.dtype = Dtype{kFloat32};
    spec.redop = RedOp{kSum};
    spec.root = victim;
    spec.count = kElements * n;
    spec.buffer = job.recv[node].data();
    spec.sendBuffer = job.send[node].data();
    spec.blockCounts.assign(n, kElements);
    spec.sendCounts.assign(n, kElements);
    spec.options.allreduceAlgo = scenario == Scenario::AllreduceRing
                                     ? AllreduceAlgo::Ring
                                     : AllreduceAlgo::RecursiveDoubling;
    applyPipeline(spec, kSlowPipeline);
    specs.push_back(spec);
  }
  job.ops = makeOps(specs);
  return job;
}

// Rounds a failure may take to reach every node: it spreads one link per round or so (a ring
// passes it around), and each op then needs a round to collect its cancelled requests.
size_t roundBound(size_t nodes) { return kFailRound + 3 * nodes + 5; }

class KilledNodeTest : public ::testing::TestWithParam<std::tuple<Scenario, size_t>> {};

std::string killedName(const ::testing::TestParamInfo<std::tuple<Scenario, size_t>>& info) {
  return std::string(scenarioName(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param)) + "Nodes";
}

TEST_P(KilledNodeTest, EverySurvivorFailsWithUnavailableWithinBoundedRounds) {
  const auto [scenario, n] = GetParam();
  Cluster cluster(n);
  const uint32_t victim = static_cast<uint32_t>(1 % n);
  Job job = makeJob(cluster, scenario, victim);
  ASSERT_EQ(job.ops.size(), n);
  const size_t failRound = scenario == Scenario::Barrier ? kBarrierFailRound : kFailRound;
  const std::vector<Outcome> outcomes =
      cluster.run(raw(job.ops), roundBound(n) * 10, [&](size_t round) {
        if (round == failRound) cluster.kill(victim);
      });
  size_t latest = 0;
  for (size_t node = 0; node < n; ++node) {
    EXPECT_EQ(outcomes[node].status.code(), Code::Unavailable)
        << "node " << node << ": " << outcomes[node].status.toString();
    if (node != victim) latest = std::max(latest, outcomes[node].rounds);
  }
  EXPECT_LE(latest, roundBound(n)) << "the failure took too long to reach every survivor";
  RecordProperty("latestSurvivorRound", static_cast<int>(latest));
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, KilledNodeTest,
    Combine(Values(Scenario::AllreduceRing, Scenario::AllreduceRecursiveDoubling,
                   Scenario::ReduceScatter, Scenario::Allgather, Scenario::Broadcast,
                   Scenario::Reduce, Scenario::AllToAll, Scenario::GatherFromDeadRoot,
                   Scenario::ScatterFromDeadRoot, Scenario::Barrier),
            Values(2, 3, 5, 8)),
    killedName);

// ---- abort() ---------------------------------------------------------------------------------

class AbortTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(AbortTest, AbortOnOneNodeFailsEveryNode) {
  const size_t n = 5;
  Cluster cluster(n);
  Job job = makeJob(cluster, GetParam(), 0);
  ASSERT_EQ(job.ops.size(), n);
  const Status why = unavailable("communicator aborted by its owner");
  const std::vector<Outcome> outcomes =
      cluster.run(raw(job.ops), roundBound(n) * 10, [&](size_t round) {
        if (round == kFailRound) job.ops[2]->abort(why);
      });
  EXPECT_EQ(outcomes[2].status.message(), why.message());
  for (size_t node = 0; node < n; ++node) {
    EXPECT_EQ(outcomes[node].status.code(), Code::Unavailable)
        << "node " << node << ": " << outcomes[node].status.toString();
    EXPECT_LE(outcomes[node].rounds, roundBound(n)) << "node " << node;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, AbortTest,
                         Values(Scenario::AllreduceRing, Scenario::AllreduceRecursiveDoubling,
                                Scenario::Allgather, Scenario::Broadcast, Scenario::AllToAll),
                         [](const auto& info) { return std::string(scenarioName(info.param)); });

TEST(AbortCodeTest, AnotherNodesNonUnavailableFailureArrivesAsRemoteError) {
  const size_t n = 4;
  Cluster cluster(n);
  Job job = makeJob(cluster, Scenario::AllreduceRing, 0);
  ASSERT_EQ(job.ops.size(), n);
  const std::vector<Outcome> outcomes =
      cluster.run(raw(job.ops), roundBound(n) * 10, [&](size_t round) {
        if (round == kFailRound) job.ops[1]->abort(Status(Code::Timeout, "deadline passed"));
      });
  EXPECT_EQ(outcomes[1].status.code(), Code::Timeout);
  // Every node names where the failure began and its words, also those told by a neighbour.
  for (size_t node : {0, 2, 3}) {
    EXPECT_EQ(outcomes[node].status.code(), Code::RemoteError)
        << "node " << node << ": " << outcomes[node].status.toString();
    EXPECT_NE(outcomes[node].status.message().find("node 1 failed this operation"),
              std::string::npos)
        << "node " << node << ": " << outcomes[node].status.message();
    EXPECT_NE(outcomes[node].status.message().find("deadline passed"), std::string::npos)
        << "node " << node << ": " << outcomes[node].status.message();
  }
}

// A notice comes from the network: what it says is reported, never trusted beyond its bounds.
TEST(OpNoticeTest, ANoticeIsReadWithinItsBoundsAndLongWordsAreCut) {
  const OpNotice told = makeOpNotice(3, Status(Code::Timeout, std::string(2000, 'x')));
  EXPECT_EQ(told.text[kOpNoticeTextBytes - 1], '\0');
  const Status heard = fromOpNotice(told, 1, 4);
  EXPECT_EQ(heard.code(), Code::RemoteError);
  EXPECT_EQ(heard.message().rfind("node 3 failed this operation (told by node 1): xxx", 0), 0u)
      << heard.message();

  OpNotice lying;
  lying.code = 9999;
  lying.origin = 77;  // beyond the op's 4 nodes: the sender is named instead
  std::memset(lying.text, 'y', sizeof(lying.text));  // no terminating NUL
  const Status odd = fromOpNotice(lying, 2, 4);
  EXPECT_EQ(odd.code(), Code::RemoteError);
  EXPECT_EQ(odd.message(), "node 2 failed this operation: a notice of unknown code 9999");

  const Status gone = fromOpNotice(makeOpNotice(0, unavailable("")), 0, 2);
  EXPECT_EQ(gone.code(), Code::Unavailable);
  EXPECT_EQ(gone.message(), "node 0 failed this operation (Unavailable)");
}

TEST(AbortCodeTest, AbortEverywhereGivesEachNodeItsOwnStatus) {
  const size_t n = 3;
  Cluster cluster(n);
  Job job = makeJob(cluster, Scenario::AllreduceRecursiveDoubling, 0);
  ASSERT_EQ(job.ops.size(), n);
  const std::vector<Outcome> outcomes =
      cluster.run(raw(job.ops), roundBound(n) * 10, [&](size_t round) {
        if (round != kFailRound) return;
        for (size_t node = 0; node < n; ++node) {
          job.ops[node]->abort(unavailable("abort " + std::to_string(node)));
        }
      });
  for (size_t node = 0; node < n; ++node) {
    EXPECT_EQ(outcomes[node].status.message(), "abort " + std::to_string(node));
  }
}

TEST(AbortCodeTest, AbortBeforeStartReportsTheAbortAndPostsNothing) {
  Cluster cluster(2);
  Job job = makeJob(cluster, Scenario::AllreduceRing, 0);
  ASSERT_EQ(job.ops.size(), 2u);
  job.ops[0]->abort(unavailable("never mind"));
  ASSERT_TRUE(job.ops[0]->start().isOk());
  Result<bool> done = job.ops[0]->progress();
  EXPECT_EQ(done.status().message(), "never mind");
  // Abort after the end changes nothing.
  job.ops[0]->abort(unavailable("again"));
  EXPECT_EQ(job.ops[0]->progress().status().message(), "never mind");
}

// ---- disagreement ------------------------------------------------------------------------------

TEST(DisagreementTest, NodesThatDisagreeOnTheCountFailInsteadOfHanging) {
  for (AllreduceAlgo algo : {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling}) {
    SCOPED_TRACE(allreduceAlgoName(algo));
    const size_t n = 4;
    Cluster cluster(n);
    std::vector<std::vector<float>> buffers(n, std::vector<float>(4097, 1.0f));
    std::vector<NetOpSpec> specs;
    for (size_t node = 0; node < n; ++node) {
      NetOpSpec spec = cluster.spec(node, NetOpKind::AllReduce);
      spec.dtype = Dtype{kFloat32};
      spec.count = node == 0 ? 4097 : 4096;  // node 0 disagrees
      spec.buffer = buffers[node].data();
      spec.options.allreduceAlgo = algo;
      specs.push_back(spec);
    }
    std::vector<NetOpPtr> ops = makeOps(specs);
    ASSERT_EQ(ops.size(), n);
    const std::vector<Outcome> outcomes = cluster.run(raw(ops), 1000);
    for (size_t node = 0; node < n; ++node) {
      const Code code = outcomes[node].status.code();
      EXPECT_TRUE(code == Code::RemoteError || code == Code::TransportError)
          << "node " << node << ": " << outcomes[node].status.toString();
    }
  }
}

TEST(DisagreementTest, ARecvLongerOrShorterThanTheSendFails) {
  for (uint64_t recvCount : {99, 101}) {
    Cluster cluster(2);
    std::vector<int64_t> out(100, 5), in(101, 0);
    NetOpSpec send = cluster.spec(0, NetOpKind::Send);
    send.dtype = Dtype{kInt64};
    send.root = 1;
    send.count = 100;
    send.buffer = out.data();
    NetOpSpec recv = cluster.spec(1, NetOpKind::Recv);
    recv.dtype = Dtype{kInt64};
    recv.root = 0;
    recv.count = recvCount;
    recv.buffer = in.data();
    std::vector<NetOpPtr> ops = makeOps({send, recv});
    ASSERT_EQ(ops.size(), 2u);
    const std::vector<Outcome> outcomes = cluster.run(raw(ops), 1000);
    // A shorter message is our finding (RemoteError); a longer one the transport's.
    EXPECT_EQ(outcomes[1].status.code(), recvCount > 100 ? Code::RemoteError : Code::TransportError)
        << outcomes[1].status.toString();
  }
}

}  // namespace
}  // namespace hc::coll::net::testing
