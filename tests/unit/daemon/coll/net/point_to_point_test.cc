// Send/recv between two nodes, the barrier, several ops in flight at once, and the tag layout:
// link indices that wrap past 2^15 messages still match exactly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/coll/net/net_tags.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_layouts.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

// Memory kinds the transfer's ends lend: the receive lent as device memory where the endpoints
// claim that kind with a minimum message size (LoopbackTransport::claimMemory), as UCX has one.
struct Lending {
  transport::MemoryKind send = transport::MemoryKind::Host;
  transport::MemoryKind recv = transport::MemoryKind::Host;
  size_t minBytes = 0;
};

// One transfer from node `from` to node `to` of a cluster of `nodes`; the others stay idle.
void transfer(size_t nodes, uint32_t from, uint32_t to, uint8_t dtype, size_t count,
              const Pipeline& pipeline, const Lending& lending = {}) {
  SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to) + " of " + std::to_string(nodes) +
               ", " + dtypeLabel(dtype) + " count " + std::to_string(count) + ", " + pipeline.name);
  Cluster cluster(nodes);
  for (size_t n = 0; n < nodes; ++n) {
    cluster.endpoint(n).claimMemory({transport::MemoryKind::Cuda}, lending.minBytes);
  }
  const std::vector<uint8_t> data = encode(dtype, randomValues(dtype, kSum, count, from + 7));
  Guarded sent(data.size()), received(data.size());
  sent.assign(data);
  NetOpSpec send = cluster.spec(from, NetOpKind::Send);
  send.dtype = Dtype{dtype};
  send.root = to;
  send.count = count;
  send.buffer = sent.data();
  send.memory = lending.send;
  applyPipeline(send, pipeline);
  NetOpSpec recv = cluster.spec(to, NetOpKind::Recv);
  recv.dtype = Dtype{dtype};
  recv.root = from;
  recv.count = count;
  recv.buffer = received.data();
  recv.memory = lending.recv;
  applyPipeline(recv, pipeline);
  Result<NetOpPtr> sendOp = makeNetOp(send), recvOp = makeNetOp(recv);
  ASSERT_TRUE(sendOp.isOk()) << sendOp.status().toString();
  ASSERT_TRUE(recvOp.isOk()) << recvOp.status().toString();
  std::vector<NetOp*> ops(nodes, nullptr);
  ops[from] = sendOp->get();
  ops[to] = recvOp->get();
  expectAllSucceeded(cluster.run(ops));
  EXPECT_EQ(received.wrongElements(data, 0, sizeOf(dtype)), 0u);
  EXPECT_TRUE(received.guardsIntact());
}

TEST(SendRecvTest, DeliversTheBufferBetweenAnyTwoNodes) {
  for (size_t nodes : {2, 3, 5}) {
    for (size_t count : {0, 1, 7, 4097, (1 << 20) + 3}) {
      for (const Pipeline& pipeline : {kDefaultPipeline, kTightPipeline}) {
        if (count > 4097 && pipeline.chunkBytes < kDefaultChunkBytes) continue;
        transfer(nodes, 0, static_cast<uint32_t>(nodes - 1), kFloat32, count, pipeline);
        transfer(nodes, static_cast<uint32_t>(nodes - 1), 0, kInt64, count, pipeline);
      }
    }
  }
}

TEST(SendRecvTest, ADeviceMemoryEndGetsNoChunkShorterThanTheTransportLetsLand) {
  // 1000-byte chunks, and messages under 300 bytes cannot land in device memory: a tail chunk of
  // 4 or 296 bytes must ride with the chunk before it, on both ends alike.
  const Pipeline chunks{"KilobyteChunks", 1000, 2};
  const Lending deviceRecv{transport::MemoryKind::Host, transport::MemoryKind::Cuda, 300};
  const Lending deviceSend{transport::MemoryKind::Cuda, transport::MemoryKind::Host, 300};
  for (size_t count : {76, 251, 1001, 1074, 2324, 5000}) {  // fp32: 4 B each
    transfer(2, 0, 1, kFloat32, count, chunks, deviceRecv);
    transfer(2, 1, 0, kFloat32, count, chunks, deviceSend);
  }
}

TEST(SendRecvTest, ManyChunksOnOneLinkMatchExactly) {
  // 40000 one-byte chunks on one link, both ends posting in order.
  transfer(2, 0, 1, kInt8, 40000, Pipeline{"OneByteChunks", 1, 64});
}

TEST(NetTagsTest, LayoutKeepsCommAndSeqWholeAndSeparatesNotices) {
  constexpr transport::Tag tag = dataTag(0xFEEDFACE0000BEEFull, 0xC0FFEE00DEADBEEFull, 40000);
  EXPECT_EQ(tag.comm, 0xFEEDFACE0000BEEFull);  // every identity bit, not the low 16
  EXPECT_EQ(tag.seq, 0xC0FFEE00DEADBEEFull);
  EXPECT_EQ(tag.chunk, 40000u);
  EXPECT_NE(dataTag(0x10001, 2, 0), dataTag(0x20001, 2, 0));
  EXPECT_EQ(dataTag(1, 2, kLinkIndexMask + 1ull), dataTag(1, 2, 0));  // wraps within 31 bits
  EXPECT_EQ(noticeTag(1, 2).chunk, kNoticeBit);
  for (uint64_t index : {0ull, 1ull, 32767ull, 32768ull, 99999ull, 0x7fffffffull}) {
    EXPECT_NE(dataTag(1, 2, index), noticeTag(1, 2));
  }
}

TEST(BarrierTest, CompletesOnEveryNode) {
  for (size_t nodes : {1, 2, 3, 4, 5, 8}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes");
    Cluster cluster(nodes);
    std::vector<NetOpSpec> specs;
    for (size_t node = 0; node < nodes; ++node) {
      specs.push_back(cluster.spec(node, NetOpKind::Barrier));
    }
    std::vector<NetOpPtr> ops = makeOps(specs);
    ASSERT_EQ(ops.size(), nodes);
    expectAllSucceeded(cluster.run(raw(ops)));
  }
}

TEST(BarrierTest, NoNodeLeavesBeforeTheLastOneEnters) {
  for (size_t nodes : {2, 3, 5, 8}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes");
    Cluster cluster(nodes);
    std::vector<NetOpSpec> specs;
    for (size_t node = 0; node < nodes; ++node) {
      specs.push_back(cluster.spec(node, NetOpKind::Barrier));
    }
    std::vector<NetOpPtr> ops = makeOps(specs);
    ASSERT_EQ(ops.size(), nodes);
    // Everyone but the last node enters and progresses for a while: nobody may leave.
    for (size_t node = 0; node + 1 < nodes; ++node) ASSERT_TRUE(ops[node]->start().isOk());
    for (int round = 0; round < 200; ++round) {
      for (size_t node = 0; node + 1 < nodes; ++node) {
        cluster.endpoint(node).progress();
        Result<bool> done = ops[node]->progress();
        ASSERT_TRUE(done.isOk()) << done.status().toString();
        ASSERT_FALSE(*done) << "node " << node << " left the barrier early";
      }
    }
    // The last one enters; now everyone leaves.
    ASSERT_TRUE(ops[nodes - 1]->start().isOk());
    std::vector<bool> left(nodes, false);
    for (int round = 0; round < 200; ++round) {
      for (size_t node = 0; node < nodes; ++node) {
        if (left[node]) continue;
        cluster.endpoint(node).progress();
        Result<bool> done = ops[node]->progress();
        ASSERT_TRUE(done.isOk()) << done.status().toString();
        left[node] = *done;
      }
    }
    for (size_t node = 0; node < nodes; ++node) EXPECT_TRUE(left[node]) << "node " << node;
  }
}

TEST(ConcurrentOpsTest, TwoAllreducesInFlightOnTheSameNodesStayApart) {
  const size_t nodes = 4, count = 4097;
  Cluster cluster(nodes);
  std::vector<std::vector<Contribution>> inputs(2);
  std::vector<Guarded> buffers;
  std::vector<NetOpSpec> specs;
  buffers.reserve(2 * nodes);
  // ops[i] runs on node i % nodes: the first four are op A, the next four op B.
  for (size_t op = 0; op < 2; ++op) {
    for (size_t node = 0; node < nodes; ++node) {
      inputs[op].push_back(randomValues(kFloat32, kSum, count, 10 * op + node));
      buffers.emplace_back(count * 4);
      buffers.back().assign(encode(kFloat32, inputs[op].back()));
      NetOpSpec spec = cluster.spec(node, NetOpKind::AllReduce);
      spec.dtype = Dtype{kFloat32};
      spec.redop = RedOp{kSum};
      spec.count = count;
      spec.buffer = buffers.back().data();
      spec.options.allreduceAlgo = op == 0 ? AllreduceAlgo::Ring : AllreduceAlgo::RecursiveDoubling;
      applyPipeline(spec, kTightPipeline);
      specs.push_back(spec);
    }
  }
  std::vector<NetOpPtr> ops = makeOps(specs);
  ASSERT_EQ(ops.size(), 2 * nodes);
  expectAllSucceeded(cluster.run(raw(ops)));
  for (size_t op = 0; op < 2; ++op) {
    const std::vector<uint8_t> want = reference(kFloat32, kSum, inputs[op], 1);
    for (size_t node = 0; node < nodes; ++node) {
      EXPECT_EQ(buffers[op * nodes + node].wrongElements(want, 0, 4), 0u)
          << "op " << op << " node " << node;
    }
  }
}

}  // namespace
}  // namespace hc::coll::net::testing
