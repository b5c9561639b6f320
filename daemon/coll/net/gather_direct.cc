// Direct gather: every node sends its block straight to the root, which receives each in place at
// that node's offset, in the order root+1, root+2, ... (the windows keep several in flight).
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule directGather(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const std::vector<Segment> blocks = nodeBlocks(spec, bufferBytes(spec));
  Schedule schedule;
  schedule.algorithm = "gather_direct";
  if (spec.self != spec.root) {
    Step send;
    send.sendTo = static_cast<int>(spec.root);
    send.sendData = blocks[spec.self].data;
    send.sendBytes = blocks[spec.self].bytes;
    schedule.steps.push_back(send);
    return schedule;
  }
  for (size_t s = 1; s < n; ++s) {
    const int source = ringNode(spec.root, static_cast<long>(s), n);
    Step receive;
    receive.recvFrom = source;
    receive.recvData = blocks[source].data;
    receive.recvBytes = blocks[source].bytes;
    receive.landing = Landing::Direct;
    schedule.steps.push_back(receive);
  }
  return schedule;
}

}  // namespace hc::coll::net
