// Pipelined chain reduce: the broadcast chain run backwards. Nodes stand in a chain from the
// root (position 0) to the tail (position N-1). The tail sends its buffer to the node before it,
// which reduces each chunk into its own and passes it on, so partial results flow toward the root
// chunk by chunk; the root's reduction finalizes (divides, for Avg).
// Non-root buffers end holding partial results: they are scratch for this op.
// TODO: a binomial tree for small messages, as for broadcast.
#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule chainReduce(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const size_t bytes = spec.count * elementBytes(spec);
  uint8_t* data = bufferBytes(spec);
  const size_t position =
      static_cast<size_t>(ringNode(spec.self, -static_cast<long>(spec.root), n));

  Schedule schedule;
  schedule.algorithm = "reduce_chain";
  // Everyone but the tail reduces what the node after it sends...
  if (position + 1 < n) {
    Step gather;
    gather.recvFrom = ringNode(spec.self, 1, n);
    gather.recvData = data;
    gather.recvBytes = bytes;
    gather.landing = Landing::Combine;
    gather.finalizes = position == 0;
    schedule.steps.push_back(gather);
  }
  // ...and everyone but the root passes its partial result toward the root.
  if (position > 0) {
    Step pass;
    pass.sendTo = ringNode(spec.self, -1, n);
    pass.sendData = data;
    pass.sendBytes = bytes;
    pass.sendsPreviousResult = position + 1 < n;
    schedule.steps.push_back(pass);
  }
  if (n == 1) {  // alone: the contribution is the sum; Avg still divides
    schedule.finalizeAtStart = data;
    schedule.finalizeBytes = bytes;
  }
  return schedule;
}

}  // namespace hc::coll::net
