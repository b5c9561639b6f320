// Ring allgather over the node blocks: the allgather half of the ring allreduce
// (ring_phases.cc). Each node starts by sending its own block to the next node; every block then
// travels N-1 hops, received in place at its offset and forwarded chunk by chunk.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule ringAllgather(const NetOpSpec& spec) {
  Schedule schedule;
  schedule.algorithm = "allgather_ring";
  appendRingAllgather(nodeBlocks(spec, bufferBytes(spec)), spec.self,
                      /*afterReduceScatter=*/false, schedule.steps);
  return schedule;
}

}  // namespace hc::coll::net
