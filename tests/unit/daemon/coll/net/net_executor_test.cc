// NetExecutor: jobs of several communicators running at once on executor threads, results through
// the done fd, jobs that cannot start, abortComm, shutdown with work in flight and the option
// checks, all over the loopback fabric. Failures and silence: net_executor_fault_test.cc; one
// allreduce over two UCX transports: net_executor_ucx_test.cc.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "daemon/coll/net/net_executor.h"
#include "tests/unit/daemon/coll/net/net_executor_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// The job buffers of one node, kept alive and in place until the jobs' results came.
struct Buffers {
  std::deque<Guarded> list;
  Guarded& add(size_t bytes) { return list.emplace_back(bytes); }
};

// ---- several jobs at once ----------------------------------------------------------------------

struct Expectation {
  size_t node;
  uint64_t id;
  Guarded* buffer;
  std::vector<uint8_t> want;
  size_t elementBytes;
  std::string algorithm;
};

// Every node runs, for each count, an allreduce (float32 sum, comm 0x0a11) and a broadcast (int64
// from root k % n, comm 0x0bca), all submitted at once; node 1 submits its jobs in reverse order,
// so the executors must run jobs of several communicators side by side to finish. Small chunks
// keep the large jobs in flight for many passes.
TEST(NetExecutorTest, ConcurrentAllreducesAndBroadcastsMatchTheReference) {
  const size_t n = 3;
  const std::vector<size_t> counts = {0, 1, 4097, 70000};  // 70000 floats: the ring (>= 256 KiB)
  ExecutorCluster cluster(n);
  std::vector<Buffers> buffers(n);
  std::vector<Expectation> expected;
  std::vector<std::vector<NetJob>> jobs(n);

  for (size_t k = 0; k < counts.size(); ++k) {
    const size_t count = counts[k];
    const uint32_t root = static_cast<uint32_t>(k % n);
    std::vector<Contribution> sums, bcast;
    for (size_t node = 0; node < n; ++node) {
      sums.push_back(randomValues(kFloat32, kSum, count, 7919 * node + k));
      bcast.push_back(randomValues(kInt64, kSum, count, 104729 * node + k + 1));
    }
    const std::vector<uint8_t> sumWant = reference(kFloat32, kSum, sums, 1);
    const std::vector<uint8_t> bcastWant = encode(kInt64, bcast[root]);
    for (size_t node = 0; node < n; ++node) {
      const uint64_t allreduceId = 100 + k, broadcastId = 200 + k;
      Guarded& a = buffers[node].add(count * 4);
      a.assign(encode(kFloat32, sums[node]));
      NetJob allreduce = cluster.job(node, allreduceId, NetOpKind::AllReduce, 0x0a11, k + 1);
      allreduce.spec.dtype = Dtype{kFloat32};
      allreduce.spec.redop = RedOp{kSum};
      allreduce.spec.count = count;
      allreduce.spec.buffer = a.data();
      allreduce.spec.options.chunkBytes = 16 * 1024;
      allreduce.spec.options.maxInFlight = 2;
      jobs[node].push_back(allreduce);
      expected.push_back({node, allreduceId, &a, sumWant, 4,
                          count == 0       ? "empty"
                          : count >= 65536 ? "allreduce_ring"
                                           : "allreduce_recursive_doubling"});

      Guarded& b = buffers[node].add(count * 8);
      b.assign(encode(kInt64, bcast[node]));
      NetJob broadcast = cluster.job(node, broadcastId, NetOpKind::Broadcast, 0x0bca, k + 1);
      broadcast.spec.dtype = Dtype{kInt64};
      broadcast.spec.root = root;
      broadcast.spec.count = count;
      broadcast.spec.buffer = b.data();
      broadcast.spec.options.chunkBytes = 8 * 1024;
      jobs[node].push_back(broadcast);
      expected.push_back(
          {node, broadcastId, &b, bcastWant, 8, count == 0 ? "empty" : "broadcast_chain"});
    }
  }
  for (size_t node = 0; node < n; ++node) {
    if (node == 1) std::reverse(jobs[node].begin(), jobs[node].end());
    for (NetJob& job : jobs[node]) cluster.at(node).submit(std::move(job));
  }

  for (const Expectation& e : expected) {
    Result<NetJobResult> result = cluster.wait(e.node, e.id);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_TRUE(result->status.isOk())
        << "node " << e.node << " job " << e.id << ": " << result->status.toString();
    EXPECT_EQ(result->algorithm, e.algorithm) << "node " << e.node << " job " << e.id;
    EXPECT_EQ(e.buffer->wrongElements(e.want, 0, e.elementBytes), 0u)
        << "node " << e.node << " job " << e.id;
    EXPECT_TRUE(e.buffer->guardsIntact()) << "node " << e.node << " job " << e.id;
  }
  // Exactly one result per job, also after the executors went on a while (heartbeats flow).
  std::this_thread::sleep_for(milliseconds(100));
  for (const Expectation& e : expected) {
    EXPECT_EQ(cluster.resultCount(e.node, e.id), 1u) << "node " << e.node << " job " << e.id;
  }
}

TEST(NetExecutorTest, SeveralSequentialJobsOnOneCommunicatorAllSucceed) {
  const size_t n = 2;
  ExecutorCluster cluster(n);
  std::vector<std::vector<int64_t>> data(n, std::vector<int64_t>(33));
  for (uint32_t seq = 1; seq <= 20; ++seq) {
    for (size_t node = 0; node < n; ++node) {
      for (size_t i = 0; i < 33; ++i) data[node][i] = static_cast<int64_t>(seq * 1000 + node + i);
      NetJob job = cluster.job(node, seq, NetOpKind::AllReduce, 0x0c0c, seq);
      job.spec.dtype = Dtype{kInt64};
      job.spec.redop = RedOp{kSum};
      job.spec.count = 33;
      job.spec.buffer = data[node].data();
      cluster.at(node).submit(std::move(job));
    }
    for (size_t node = 0; node < n; ++node) {
      Result<NetJobResult> result = cluster.wait(node, seq);
      ASSERT_TRUE(result.isOk()) << result.status().toString();
      ASSERT_TRUE(result->status.isOk()) << result->status.toString();
      for (size_t i = 0; i < 33; ++i) {
        ASSERT_EQ(data[node][i], static_cast<int64_t>(2 * (seq * 1000 + i) + 1)) << "seq " << seq;
      }
    }
  }
}

// ---- the done fd -------------------------------------------------------------------------------

TEST(NetExecutorTest, DoneFdIsReadableExactlyWhileResultsWait) {
  ExecutorCluster cluster(2);
  const int fd = cluster.at(0).doneFd();
  EXPECT_FALSE(readable(fd));
  EXPECT_TRUE(cluster.at(0).takeResults().empty());
  for (size_t node = 0; node < 2; ++node) {
    cluster.at(node).submit(cluster.job(node, 42, NetOpKind::Barrier, 0x0d0d, 1));
  }
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, static_cast<int>(kDeadline.count())), 1)
      << "no result within the deadline";
  std::vector<NetJobResult> results = cluster.at(0).takeResults();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].id, 42u);
  EXPECT_TRUE(results[0].status.isOk()) << results[0].status.toString();
  EXPECT_EQ(results[0].algorithm, "barrier_dissemination");
  EXPECT_FALSE(readable(fd)) << "taken results must reset the done fd";
  EXPECT_TRUE(cluster.at(0).takeResults().empty());
  ASSERT_TRUE(cluster.wait(1, 42).isOk());
}

// ---- jobs that cannot start --------------------------------------------------------------------

TEST(NetExecutorTest, AJobNamingAnUnreachableNodeFailsAtOnce) {
  ExecutorCluster cluster(1);
  auto stranger = cluster.fabric().attach();  // a node that exists, then dies
  ASSERT_TRUE(stranger.isOk());
  const transport::PeerAddress strangerAddress = stranger.value()->address();
  ASSERT_TRUE(cluster.fabric().kill(stranger.value()->id()).isOk());

  std::vector<float> buffer(16, 1.0f);
  auto allreduce = [&](uint64_t id, transport::PeerAddress other) {
    NetJob job = cluster.job(0, id, NetOpKind::AllReduce, 0x0e0e, static_cast<uint32_t>(id));
    job.spec.dtype = Dtype{kFloat32};
    job.spec.count = buffer.size();
    job.spec.buffer = buffer.data();
    job.nodes.push_back(std::move(other));  // node 1
    return job;
  };
  cluster.at(0).submit(allreduce(1, transport::PeerAddress{{1, 2, 3}}));
  cluster.at(0).submit(allreduce(2, strangerAddress));
  NetJob selfless = allreduce(3, strangerAddress);
  selfless.spec.self = 5;
  cluster.at(0).submit(std::move(selfless));
  NetJob invalid = allreduce(4, cluster.addresses()[0]);
  invalid.spec.options.maxInFlight = 0;  // makeNetOp refuses it
  cluster.at(0).submit(std::move(invalid));

  Result<NetJobResult> garbage = cluster.wait(0, 1);
  ASSERT_TRUE(garbage.isOk()) << garbage.status().toString();
  EXPECT_EQ(garbage->status.code(), Code::InvalidArgument) << garbage->status.toString();
  EXPECT_NE(garbage->status.message().find("peer daemon 1"), std::string::npos)
      << garbage->status.toString();
  EXPECT_EQ(garbage->algorithm, "");

  Result<NetJobResult> dead = cluster.wait(0, 2);
  ASSERT_TRUE(dead.isOk()) << dead.status().toString();
  EXPECT_EQ(dead->status.code(), Code::Unavailable) << dead->status.toString();
  EXPECT_NE(dead->status.message().find("peer daemon 1"), std::string::npos);

  Result<NetJobResult> selfOut = cluster.wait(0, 3);
  ASSERT_TRUE(selfOut.isOk());
  EXPECT_EQ(selfOut->status.code(), Code::InvalidArgument) << selfOut->status.toString();

  Result<NetJobResult> refused = cluster.wait(0, 4);
  ASSERT_TRUE(refused.isOk());
  EXPECT_EQ(refused->status.code(), Code::InvalidArgument) << refused->status.toString();
  stranger.value().reset();
}

// ---- abortComm ---------------------------------------------------------------------------------

TEST(NetExecutorTest, AbortCommStopsOnlyThatCommunicatorsJobs) {
  ExecutorCluster cluster(2);
  std::vector<float> lonely(1000, 1.0f), mine(8, 2.0f), theirs(8, 1.0f);
  // Node 1 never posts its part of job 1: only the abort can end it.
  NetJob waiting = cluster.job(0, 1, NetOpKind::AllReduce, 0x0707, 1);
  waiting.spec.dtype = Dtype{kFloat32};
  waiting.spec.count = lonely.size();
  waiting.spec.buffer = lonely.data();
  cluster.at(0).submit(std::move(waiting));
  // A barrier of another communicator, on both nodes, runs meanwhile.
  for (size_t node = 0; node < 2; ++node) {
    cluster.at(node).submit(cluster.job(node, 2, NetOpKind::Barrier, 0x0808, 1));
  }
  for (size_t node = 0; node < 2; ++node) {
    Result<NetJobResult> barrier = cluster.wait(node, 2);
    ASSERT_TRUE(barrier.isOk()) << barrier.status().toString();
    EXPECT_TRUE(barrier->status.isOk()) << barrier->status.toString();
  }
  EXPECT_EQ(cluster.resultCount(0, 1), 0u) << "job 1 cannot finish without node 1";

  const auto start = Clock::now();
  cluster.at(0).abortComm(0x0707, unavailable("communicator 0x0707 aborted by the test"));
  Result<NetJobResult> aborted = cluster.wait(0, 1);
  ASSERT_TRUE(aborted.isOk()) << aborted.status().toString();
  EXPECT_EQ(aborted->status.code(), Code::Unavailable);
  EXPECT_EQ(aborted->status.message(), "communicator 0x0707 aborted by the test");
  EXPECT_LT(msSince(start), 2000);

  // A job queued just before the abort is aborted too; one submitted after it is not.
  NetJob queued = cluster.job(0, 3, NetOpKind::Barrier, 0x0707, 2);
  cluster.at(0).submit(std::move(queued));
  cluster.at(0).abortComm(0x0707, Status());
  Result<NetJobResult> queuedResult = cluster.wait(0, 3);
  ASSERT_TRUE(queuedResult.isOk()) << queuedResult.status().toString();
  EXPECT_EQ(queuedResult->status.code(), Code::Unavailable) << queuedResult->status.toString();
  // Node 1 posts first, and node 0 only after several drain passes: node 1's messages wait at
  // node 0 with no receive posted, and must not be taken for stray traffic of the aborted ops.
  for (size_t node : {1, 0}) {
    NetJob after = cluster.job(node, 4, NetOpKind::AllReduce, 0x0707, 3);
    after.spec.dtype = Dtype{kFloat32};
    after.spec.count = mine.size();
    after.spec.buffer = node == 0 ? mine.data() : theirs.data();
    cluster.at(node).submit(std::move(after));
    if (node == 1) std::this_thread::sleep_for(kDrainInterval * 4);
  }
  for (size_t node = 0; node < 2; ++node) {
    Result<NetJobResult> result = cluster.wait(node, 4);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_TRUE(result->status.isOk()) << result->status.toString();
  }
  EXPECT_EQ(mine, std::vector<float>(8, 3.0f));
  EXPECT_EQ(theirs, std::vector<float>(8, 3.0f));
}

// ---- shutdown ----------------------------------------------------------------------------------

TEST(NetExecutorTest, StopWithARunningJobIsPromptAndReportsShuttingDown) {
  ExecutorCluster cluster(2);
  std::vector<float> buffer(4096, 1.0f);
  NetJob job = cluster.job(0, 9, NetOpKind::AllReduce, 0x0909, 1);  // node 1 never joins
  job.spec.dtype = Dtype{kFloat32};
  job.spec.count = buffer.size();
  job.spec.buffer = buffer.data();
  cluster.at(0).submit(std::move(job));
  // Let it start: a barrier on both nodes, submitted after it, completes first on node 0.
  for (size_t node = 0; node < 2; ++node) {
    cluster.at(node).submit(cluster.job(node, 10, NetOpKind::Barrier, 0x0a0a, 1));
  }
  ASSERT_TRUE(cluster.wait(0, 10).isOk());

  const auto start = Clock::now();
  cluster.stop(0);
  EXPECT_LT(msSince(start), 1000) << "stop() with a running job took too long";
  Result<NetJobResult> result = cluster.wait(0, 9, milliseconds(0));
  ASSERT_TRUE(result.isOk()) << "stop() must post the result before it returns";
  EXPECT_EQ(result->status.code(), Code::Unavailable);
  EXPECT_EQ(result->status.message(), "shutting down");
  EXPECT_EQ(result->algorithm, "allreduce_recursive_doubling");

  cluster.at(0).submit(cluster.job(0, 11, NetOpKind::Barrier, 0x0a0a, 2));
  Result<NetJobResult> late = cluster.wait(0, 11, milliseconds(0));
  ASSERT_TRUE(late.isOk()) << "a job submitted after stop() is answered at once";
  EXPECT_EQ(late->status.message(), "shutting down");
  cluster.at(0).stop();  // idempotent
}

TEST(NetExecutorTest, DestructorWithARunningJobReturnsPromptly) {
  ExecutorCluster cluster(2);
  std::vector<float> buffer(100000, 1.0f);
  NetJob job = cluster.job(0, 1, NetOpKind::AllReduce, 0x0b0b, 1);  // node 1 never joins
  job.spec.dtype = Dtype{kFloat32};
  job.spec.count = buffer.size();
  job.spec.buffer = buffer.data();
  cluster.at(0).submit(std::move(job));
  const auto start = Clock::now();
  cluster.destroy(0);
  EXPECT_LT(msSince(start), 1000) << "the destructor with a running job took too long";
}

// ---- options -----------------------------------------------------------------------------------

TEST(NetExecutorTest, StartRefusesOptionsOutOfRange) {
  transport::LoopbackFabric fabric;
  auto check = [&](NetExecutorOptions options, const char* what) {
    auto endpoint = fabric.attach();
    ASSERT_TRUE(endpoint.isOk());
    Result<std::unique_ptr<NetExecutor>> made =
        NetExecutor::start(std::move(endpoint.value()), options);
    EXPECT_EQ(made.status().code(), Code::InvalidArgument) << what;
  };
  NetExecutorOptions options;
  options.heartbeatInterval = milliseconds(0);
  check(options, "heartbeat 0");
  options = NetExecutorOptions{};
  options.maxSleep = milliseconds(0);
  check(options, "maxSleep 0");
  options = NetExecutorOptions{};
  options.heartbeatInterval = milliseconds(100);
  options.silenceTimeout = milliseconds(399);
  check(options, "silence shorter than 4 heartbeats");
  EXPECT_EQ(NetExecutor::start(nullptr, NetExecutorOptions{}).status().code(),
            Code::InvalidArgument);
  options.silenceTimeout = milliseconds(0);  // off: allowed
  auto endpoint = fabric.attach();
  ASSERT_TRUE(endpoint.isOk());
  Result<std::unique_ptr<NetExecutor>> made =
      NetExecutor::start(std::move(endpoint.value()), options);
  EXPECT_TRUE(made.isOk()) << made.status().toString();
}

}  // namespace
}  // namespace hc::coll::net::testing
