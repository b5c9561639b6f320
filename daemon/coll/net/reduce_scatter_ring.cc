// Ring reduce-scatter over the node blocks: the reduce-scatter half of the ring allreduce
// (ring_phases.cc), with the communicator's block layout as the segments, so each node ends
// owning the reduction of its own block (several consecutive rank blocks when it hosts several
// ranks). Other blocks of the buffer end holding partial results.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule ringReduceScatter(const NetOpSpec& spec) {
  const std::vector<Segment> blocks = nodeBlocks(spec, bufferBytes(spec));
  Schedule schedule;
  schedule.algorithm = "reduce_scatter_ring";
  appendRingReduceScatter(blocks, spec.self, schedule.steps);
  // Alone, a node's block is already the sum; Avg still divides.
  if (nodeCount(spec) == 1) {
    schedule.finalizeAtStart = blocks[spec.self].data;
    schedule.finalizeBytes = blocks[spec.self].bytes;
  }
  return schedule;
}

}  // namespace hc::coll::net
