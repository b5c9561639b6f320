// Ring allreduce: reduce-scatter, then allgather, around the ring of nodes (ring_phases.cc).
// Each node sends and receives 2(N-1)/N of the buffer, the least any allreduce can, so this is
// the algorithm for large messages; its 2(N-1) steps of latency are what RecursiveDoubling saves
// on small ones.
//
// 1. Cut the buffer into N segments as even as whole elements allow (the first count % N
//    segments get one element more). A segment may be empty when count < N: its steps then
//    carry empty messages, which keeps every node's schedule the same shape.
// 2. Reduce-scatter: after N-1 steps node `self` owns the finished segment `self`; its last
//    reduction also divides, for Avg.
// 3. Allgather: the finished segments travel around the ring and land in place. Each was
//    computed once, so every node ends bitwise equal.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule ringAllreduce(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const size_t bytesPerElement = elementBytes(spec);
  uint8_t* data = bufferBytes(spec);

  // 1. Segments.
  std::vector<Segment> segments(n);
  const uint64_t base = spec.count / n;
  const uint64_t longer = spec.count % n;
  uint64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t elements = base + (i < longer ? 1 : 0);
    segments[i] = Segment{data + offset * bytesPerElement, elements * bytesPerElement};
    offset += elements;
  }

  Schedule schedule;
  schedule.algorithm = "allreduce_ring";
  // 2 and 3.
  appendRingReduceScatter(segments, spec.self, schedule.steps);
  appendRingAllgather(segments, spec.self, /*afterReduceScatter=*/n > 1, schedule.steps);
  // Alone, a node's contribution is already the sum; Avg still divides.
  if (n == 1) {
    schedule.finalizeAtStart = data;
    schedule.finalizeBytes = spec.count * bytesPerElement;
  }
  return schedule;
}

}  // namespace hc::coll::net
