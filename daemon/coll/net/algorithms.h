// The schedule builders: one file per algorithm, each turning a NetOpSpec that makeNetOp()
// validated into this node's Schedule. Private to daemon/coll/net.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/reduce/reduce.h"
#include "daemon/coll/net/net_op.h"
#include "daemon/coll/net/schedule.h"

namespace hc::coll::net {

// allreduce_ring.cc, allreduce_recursive_doubling.cc
Schedule ringAllreduce(const NetOpSpec& spec);
Schedule recursiveDoublingAllreduce(const NetOpSpec& spec);
// reduce_scatter_ring.cc, allgather_ring.cc
Schedule ringReduceScatter(const NetOpSpec& spec);
Schedule ringAllgather(const NetOpSpec& spec);
// broadcast_chain.cc, reduce_chain.cc
Schedule chainBroadcast(const NetOpSpec& spec);
Schedule chainReduce(const NetOpSpec& spec);
// alltoall_pairwise.cc, gather_direct.cc, scatter_direct.cc
Schedule pairwiseAllToAll(const NetOpSpec& spec);
Schedule directGather(const NetOpSpec& spec);
Schedule directScatter(const NetOpSpec& spec);
// send_recv.cc: NetOpKind::Send or Recv.
Schedule pointToPoint(const NetOpSpec& spec);
// barrier_dissemination.cc
Schedule disseminationBarrier(const NetOpSpec& spec);

// ---- shared by the builders --------------------------------------------------------------------

// A byte range of the node buffer: a ring segment, or one node's block.
struct Segment {
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

inline size_t nodeCount(const NetOpSpec& spec) { return spec.peers.size(); }
inline uint8_t* bufferBytes(const NetOpSpec& spec) { return static_cast<uint8_t*>(spec.buffer); }
inline size_t elementBytes(const NetOpSpec& spec) { return dtypeSize(spec.dtype); }
// The node `delta` places after `node` around the ring (delta may be negative).
inline int ringNode(uint32_t node, long delta, size_t n) {
  const long nn = static_cast<long>(n);
  return static_cast<int>(((static_cast<long>(node) + delta) % nn + nn) % nn);
}
// Element offsets of a layout: the given ones, or the prefix sums of the counts.
std::vector<uint64_t> layoutOffsets(const std::vector<uint64_t>& counts,
                                    const std::vector<uint64_t>& offsets);
// Every node's block of spec.blockCounts / spec.blockOffsets, in bytes of the node buffer.
std::vector<Segment> nodeBlocks(const NetOpSpec& spec, uint8_t* base);

// ring_phases.cc: the two halves of a ring over N segments, N = segments.size(), each N-1 steps
// of "send one segment to the next node, receive one from the previous".
// Reduce-scatter: afterwards segment `self` holds the reduction of every node's segment `self`
// (its last reduction finalizes). Allgather: every node's segment `self` reaches every node;
// afterReduceScatter makes its first send wait for the reduce-scatter's last reduction.
void appendRingReduceScatter(const std::vector<Segment>& segments, uint32_t self,
                             std::vector<Step>& steps);
void appendRingAllgather(const std::vector<Segment>& segments, uint32_t self,
                         bool afterReduceScatter, std::vector<Step>& steps);

}  // namespace hc::coll::net
