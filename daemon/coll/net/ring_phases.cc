// The two phases of a ring, shared by allreduce, reduce-scatter and allgather. Nodes sit on a
// ring 0 -> 1 -> ... -> N-1 -> 0; in every step each node sends one segment to the next node and
// receives one from the previous node, so all N links carry data at once.
//
// Which segment moves when (all indices modulo N):
//   reduce-scatter step s = 0..N-2: send segment self-s-1, receive segment self-s-2 and reduce
//     it into ours. The segment we send at step s is the one we reduced at step s-1, so partial
//     sums travel around the ring gathering one contribution per hop; after N-1 hops segment
//     `self` has met every node's contribution, here, and nowhere else.
//   allgather step s = 0..N-2: send segment self-s, receive segment self-s-1 in place. Each
//     finished segment is computed once (by its owner) and only copied after that, so every
//     node ends with the same bits.
// Step s forwards what step s-1 received, chunk by chunk, so the two phases pipeline: chunk 0 of
// a segment can be two hops on while chunk 5 is still arriving.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

std::vector<uint64_t> layoutOffsets(const std::vector<uint64_t>& counts,
                                    const std::vector<uint64_t>& offsets) {
  if (!offsets.empty()) return offsets;
  std::vector<uint64_t> prefix(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) prefix[i] = prefix[i - 1] + counts[i - 1];
  return prefix;
}

std::vector<Segment> nodeBlocks(const NetOpSpec& spec, uint8_t* base) {
  const size_t bytesPerElement = elementBytes(spec);
  const std::vector<uint64_t> offsets = layoutOffsets(spec.blockCounts, spec.blockOffsets);
  std::vector<Segment> blocks(spec.blockCounts.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    blocks[i] = Segment{base + offsets[i] * bytesPerElement, spec.blockCounts[i] * bytesPerElement};
  }
  return blocks;
}

void appendRingReduceScatter(const std::vector<Segment>& segments, uint32_t self,
                             std::vector<Step>& steps) {
  const size_t n = segments.size();
  for (size_t s = 0; s + 1 < n; ++s) {
    const long hop = static_cast<long>(s);
    const Segment& out = segments[ringNode(self, -hop - 1, n)];
    const Segment& in = segments[ringNode(self, -hop - 2, n)];
    Step step;
    step.sendTo = ringNode(self, 1, n);
    step.sendData = out.data;
    step.sendBytes = out.bytes;
    step.sendsPreviousResult = s > 0;  // the partial we reduced one step ago
    step.recvFrom = ringNode(self, -1, n);
    step.recvData = in.data;
    step.recvBytes = in.bytes;
    step.landing = Landing::Combine;
    step.finalizes = s + 2 == n;  // the last hop completes segment `self`
    steps.push_back(step);
  }
}

void appendRingAllgather(const std::vector<Segment>& segments, uint32_t self,
                         bool afterReduceScatter, std::vector<Step>& steps) {
  const size_t n = segments.size();
  for (size_t s = 0; s + 1 < n; ++s) {
    const long hop = static_cast<long>(s);
    const Segment& out = segments[ringNode(self, -hop, n)];
    const Segment& in = segments[ringNode(self, -hop - 1, n)];
    Step step;
    step.sendTo = ringNode(self, 1, n);
    step.sendData = out.data;
    step.sendBytes = out.bytes;
    // Step 0 sends our own segment: ready at once, or once the reduce-scatter finished it.
    step.sendsPreviousResult = s > 0 || afterReduceScatter;
    step.recvFrom = ringNode(self, -1, n);
    step.recvData = in.data;
    step.recvBytes = in.bytes;
    step.landing = Landing::Direct;
    steps.push_back(step);
  }
}

}  // namespace hc::coll::net
