// NetExecutor under failure: a peer daemon that dies or exits fails the jobs that name it within a
// bound, and later jobs naming it at once; a peer daemon that is stopped (frozen: its endpoint
// open, its thread still) fails them after the silence timeout; a peer in no running job, or one
// that is merely late, is never failed for silence. The heartbeat wire format is checked from a
// bare endpoint playing the peer.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/coll/net/net_executor.h"
#include "tests/unit/daemon/coll/net/net_executor_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// How long a reported peer failure may take to fail a job (milliseconds expected; a loaded
// 2-core machine gets room).
constexpr int64_t kFailureBoundMs = 2000;

bool contains(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

// A barrier among `members` (default: all) with id and seq `id` on every member; asserts success.
void barrier(ExecutorCluster& cluster, uint64_t id, std::vector<size_t> members = {}) {
  if (members.empty()) {
    for (size_t node = 0; node < cluster.size(); ++node) members.push_back(node);
  }
  for (size_t node : members) {
    cluster.at(node).submit(
        cluster.job(node, id, NetOpKind::Barrier, 0x0bb0, static_cast<uint32_t>(id), members));
  }
  for (size_t node : members) {
    Result<NetJobResult> result = cluster.wait(node, id);
    ASSERT_TRUE(result.isOk()) << "node " << node << ": " << result.status().toString();
    ASSERT_TRUE(result->status.isOk()) << "node " << node << ": " << result->status.toString();
  }
}

NetJob allreduce(const ExecutorCluster& cluster, size_t node, uint64_t id, std::vector<float>& data,
                 const std::vector<size_t>& members = {}) {
  NetJob job =
      cluster.job(node, id, NetOpKind::AllReduce, 0x0aa0, static_cast<uint32_t>(id), members);
  job.spec.dtype = Dtype{kFloat32};
  job.spec.redop = RedOp{kSum};
  job.spec.count = data.size();
  job.spec.buffer = data.data();
  return job;
}

// ---- peers that go away ------------------------------------------------------------------------

enum class Departure { Killed, ExecutorDestroyed };

class PeerFailureTest : public ::testing::TestWithParam<Departure> {};

TEST_P(PeerFailureTest, AbortsTheJobsThatNameThePeerAndLaterOnesAtOnce) {
  ExecutorCluster cluster(3);
  barrier(cluster, 1);  // every pair connected
  if (HasFatalFailure()) return;
  std::vector<std::vector<float>> data(3, std::vector<float>(50000, 1.0f));
  // Nodes 0 and 1 wait in an allreduce for node 2, which never joins: it goes away instead.
  for (size_t node : {0, 1}) cluster.at(node).submit(allreduce(cluster, node, 2, data[node]));
  const auto start = Clock::now();
  if (GetParam() == Departure::Killed) {
    cluster.kill(2);
  } else {
    cluster.destroy(2);
  }
  for (size_t node : {0, 1}) {
    Result<NetJobResult> result = cluster.wait(node, 2);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_EQ(result->status.code(), Code::Unavailable) << result->status.toString();
    EXPECT_TRUE(contains(result->status, "peer daemon 2 went away"))
        << "node " << node << ": " << result->status.toString();
  }
  const int64_t took = msSince(start);
  EXPECT_LT(took, kFailureBoundMs);
  RecordProperty("failure_ms", static_cast<int>(took));

  // A later job naming node 2 fails without waiting; one without it is unaffected.
  const auto later = Clock::now();
  cluster.at(0).submit(allreduce(cluster, 0, 3, data[0]));
  Result<NetJobResult> refused = cluster.wait(0, 3);
  ASSERT_TRUE(refused.isOk()) << refused.status().toString();
  EXPECT_TRUE(contains(refused->status, "peer daemon 2 went away")) << refused->status.toString();
  EXPECT_LT(msSince(later), 500);

  std::vector<std::vector<float>> pair(2, std::vector<float>(1000, 2.0f));
  for (size_t node : {0, 1})
    cluster.at(node).submit(allreduce(cluster, node, 4, pair[node], {0, 1}));
  for (size_t node : {0, 1}) {
    Result<NetJobResult> result = cluster.wait(node, 4);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_TRUE(result->status.isOk()) << result->status.toString();
    EXPECT_EQ(pair[node], std::vector<float>(1000, 4.0f));
  }
}

INSTANTIATE_TEST_SUITE_P(Departures, PeerFailureTest,
                         ::testing::Values(Departure::Killed, Departure::ExecutorDestroyed),
                         [](const auto& info) {
                           return info.param == Departure::Killed ? "Killed" : "ExecutorDestroyed";
                         });

// ---- silent peers ------------------------------------------------------------------------------

TEST(SilenceTest, AFrozenPeerFailsTheJobsWaitingForItAfterTheSilenceTimeout) {
  const NetExecutorOptions options = silenceOptions();
  const int64_t timeoutMs = options.silenceTimeout.count();
  ExecutorCluster cluster(2, options);
  barrier(cluster, 1);  // both connected, both heard
  if (HasFatalFailure()) return;
  ASSERT_TRUE(cluster.transport(1).freeze()) << "node 1's thread never parked";
  const auto frozen = Clock::now();
  std::vector<float> data(5000, 1.0f);
  cluster.at(0).submit(allreduce(cluster, 0, 2, data));
  Result<NetJobResult> result = cluster.wait(0, 2);
  const int64_t took = msSince(frozen);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->status.code(), Code::Unavailable) << result->status.toString();
  EXPECT_TRUE(contains(result->status, "peer daemon 1 silent for")) << result->status.toString();
  // Node 1 was last heard at most a heartbeat interval (and a pass) before it froze.
  EXPECT_GE(took, timeoutMs - options.heartbeatInterval.count() - 10);
  EXPECT_LT(took, timeoutMs + kFailureBoundMs);
  RecordProperty("silence_ms", static_cast<int>(took));

  // From now on node 1 counts as failed on node 0.
  cluster.at(0).submit(allreduce(cluster, 0, 3, data));
  Result<NetJobResult> refused = cluster.wait(0, 3, milliseconds(1000));
  ASSERT_TRUE(refused.isOk()) << refused.status().toString();
  EXPECT_TRUE(contains(refused->status, "peer daemon 1 silent for")) << refused->status.toString();

  // Node 1 wakes up; node 0 no longer talks to it, so its own job with node 0 fails too, by
  // silence, instead of hanging.
  cluster.transport(1).thaw();
  std::vector<float> mine(5000, 1.0f);
  cluster.at(1).submit(allreduce(cluster, 1, 4, mine));
  Result<NetJobResult> woken = cluster.wait(1, 4);
  ASSERT_TRUE(woken.isOk()) << woken.status().toString();
  EXPECT_EQ(woken->status.code(), Code::Unavailable) << woken->status.toString();
}

TEST(SilenceTest, OnlyPeersOfARunningJobAreJudgedAndALatePeerIsWaitedFor) {
  const NetExecutorOptions options = silenceOptions();
  const milliseconds twice = 2 * options.silenceTimeout;
  ExecutorCluster cluster(3, options);
  barrier(cluster, 1);
  if (HasFatalFailure()) return;
  // Node 2 stops, but no running job names it.
  ASSERT_TRUE(cluster.transport(2).freeze());
  // Node 0 receives from node 1, which is alive (heartbeats flow) but late by two timeouts.
  std::vector<int64_t> out(16), in(16, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(i * i + 7);
  NetJob recv = cluster.job(0, 2, NetOpKind::Recv, 0x0cc0, 1, {0, 1});
  recv.spec.dtype = Dtype{kInt64};
  recv.spec.root = 1;
  recv.spec.count = in.size();
  recv.spec.buffer = in.data();
  cluster.at(0).submit(std::move(recv));
  Result<NetJobResult> early = cluster.wait(0, 2, twice);
  EXPECT_EQ(early.status().code(), Code::Timeout)
      << "a late but live peer must be waited for: "
      << (early.isOk() ? early->status.toString() : early.status().toString());

  NetJob send = cluster.job(1, 2, NetOpKind::Send, 0x0cc0, 1, {0, 1});
  send.spec.dtype = Dtype{kInt64};
  send.spec.root = 0;
  send.spec.count = out.size();
  send.spec.buffer = out.data();
  cluster.at(1).submit(std::move(send));
  for (size_t node : {0, 1}) {
    Result<NetJobResult> result = cluster.wait(node, 2);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_TRUE(result->status.isOk()) << "node " << node << ": " << result->status.toString();
  }
  EXPECT_EQ(in, out);

  // Node 2 was frozen all along without being failed by anyone: it rejoins.
  cluster.transport(2).thaw();
  barrier(cluster, 3);
}

TEST(SilenceTest, APeerThatNeverConnectedBackIsLateNotSilent) {
  const NetExecutorOptions options = silenceOptions();
  ExecutorCluster cluster(2, options);
  std::vector<std::vector<float>> data(2, std::vector<float>(300, 1.5f));
  cluster.at(0).submit(allreduce(cluster, 0, 1, data[0]));
  Result<NetJobResult> early = cluster.wait(0, 1, 2 * options.silenceTimeout);
  EXPECT_EQ(early.status().code(), Code::Timeout)
      << (early.isOk() ? early->status.toString() : early.status().toString());
  cluster.at(1).submit(allreduce(cluster, 1, 1, data[1]));
  for (size_t node : {0, 1}) {
    Result<NetJobResult> result = cluster.wait(node, 1);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_TRUE(result->status.isOk()) << result->status.toString();
    EXPECT_EQ(data[node], std::vector<float>(300, 3.0f));
  }
}

// ---- the heartbeat on the wire -----------------------------------------------------------------

TEST(HeartbeatTest, FlowsOnTheReservedTagAndOneHeardPeerThatFallsSilentIsFailed) {
  const NetExecutorOptions options = silenceOptions();
  ExecutorCluster cluster(1, options);
  auto bare = cluster.fabric().attach();  // plays node 1 by hand
  ASSERT_TRUE(bare.isOk());
  transport::LoopbackTransport& peer = *bare.value();
  std::vector<float> data(100, 1.0f);
  NetJob job = cluster.job(0, 1, NetOpKind::AllReduce, 0x0dd0, 1);
  job.spec.dtype = Dtype{kFloat32};
  job.spec.count = data.size();
  job.spec.buffer = data.data();
  job.nodes.push_back(peer.address());
  cluster.at(0).submit(std::move(job));

  Result<transport::PeerId> executor = peer.connect(cluster.addresses()[0]);
  ASSERT_TRUE(executor.isOk()) << executor.status().toString();
  const transport::Tag beatTag = transport::makeTag(transport::kHeartbeatIdentity, 0, 0);
  EXPECT_LT(beatTag.comm, transport::kFirstCommIdentity);
  for (uint64_t want : {0, 1, 2}) {  // 8 bytes each: how many the executor sent us before
    uint64_t beat = ~0ull;
    Result<transport::RequestId> recv = peer.postRecv(*executor, beatTag, &beat, sizeof(beat));
    ASSERT_TRUE(recv.isOk());
    Result<size_t> got = finish(peer, *recv);
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    EXPECT_EQ(*got, sizeof(beat));
    EXPECT_EQ(beat, want);
  }
  // Never heard from, node 1 is late, not silent: the job waits.
  Result<NetJobResult> early = cluster.wait(0, 1, 2 * options.silenceTimeout);
  EXPECT_EQ(early.status().code(), Code::Timeout);

  // One heartbeat, then silence: the job fails one timeout after it, not before.
  uint64_t ours = 0;
  Result<transport::RequestId> send = peer.postSend(*executor, beatTag, &ours, sizeof(ours));
  ASSERT_TRUE(send.isOk());
  const auto spoke = Clock::now();
  ASSERT_TRUE(finish(peer, *send).isOk());
  Result<NetJobResult> result = cluster.wait(0, 1);
  const int64_t took = msSince(spoke);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->status.code(), Code::Unavailable) << result->status.toString();
  EXPECT_TRUE(contains(result->status, "peer daemon 1 silent for")) << result->status.toString();
  EXPECT_GE(took, options.silenceTimeout.count());
  EXPECT_LT(took, options.silenceTimeout.count() + kFailureBoundMs);
}

}  // namespace
}  // namespace hc::coll::net::testing
