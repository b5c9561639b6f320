// Pipelined chain broadcast: the root sends to the next node, which forwards every chunk as soon
// as it has landed, and so on around the ring of nodes (root, root+1, ..., root-1). With C
// chunks the last node has everything after N-1+C chunk times, so a large broadcast runs near
// link speed whatever N is.
// TODO: a binomial tree for small messages (log2(N) hops instead of N-1) once the daemon
// measures the crossover; for now Auto has one algorithm here.
#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule chainBroadcast(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const size_t bytes = spec.count * elementBytes(spec);
  uint8_t* data = bufferBytes(spec);
  // Our place in the chain: 0 is the root, n-1 the tail.
  const size_t position =
      static_cast<size_t>(ringNode(spec.self, -static_cast<long>(spec.root), n));

  Schedule schedule;
  schedule.algorithm = "broadcast_chain";
  // Everyone but the root receives the buffer in place from the node before it...
  if (position > 0) {
    Step receive;
    receive.recvFrom = ringNode(spec.self, -1, n);
    receive.recvData = data;
    receive.recvBytes = bytes;
    receive.landing = Landing::Direct;
    schedule.steps.push_back(receive);
  }
  // ...and everyone but the tail passes each chunk on once it is here.
  if (position + 1 < n) {
    Step forward;
    forward.sendTo = ringNode(spec.self, 1, n);
    forward.sendData = data;
    forward.sendBytes = bytes;
    forward.sendsPreviousResult = position > 0;
    schedule.steps.push_back(forward);
  }
  return schedule;
}

}  // namespace hc::coll::net
