// Pairwise-exchange all-to-all: in step s = 1..N-1 each node sends its block for node self+s and
// receives node self-s's block for it, in place at that node's offset. Every node talks to one
// node per step and every link is used once; the steps do not depend on one another, so the
// windows keep several steps in flight at once. The node's own block is copied locally at start.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule pairwiseAllToAll(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const size_t bytesPerElement = elementBytes(spec);
  const std::vector<Segment> into = nodeBlocks(spec, bufferBytes(spec));
  const std::vector<uint64_t> sendOffsets = layoutOffsets(spec.sendCounts, spec.sendOffsets);
  const auto* from = static_cast<const uint8_t*>(spec.sendBuffer);
  auto outgoing = [&](size_t node) { return from + sendOffsets[node] * bytesPerElement; };

  Schedule schedule;
  schedule.algorithm = "alltoall_pairwise";
  schedule.localCopies.push_back(
      LocalCopy{outgoing(spec.self), into[spec.self].data, into[spec.self].bytes});
  for (size_t s = 1; s < n; ++s) {
    const int to = ringNode(spec.self, static_cast<long>(s), n);
    const int source = ringNode(spec.self, -static_cast<long>(s), n);
    Step step;
    step.sendTo = to;
    step.sendData = outgoing(to);
    step.sendBytes = spec.sendCounts[to] * bytesPerElement;
    step.recvFrom = source;
    step.recvData = into[source].data;
    step.recvBytes = into[source].bytes;
    step.landing = Landing::Direct;
    schedule.steps.push_back(step);
  }
  return schedule;
}

}  // namespace hc::coll::net
