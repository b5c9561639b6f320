// Direct scatter: the root sends each node its block, in the order root+1, root+2, ... (the
// windows keep several in flight); each node receives its block in place at its offset.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule directScatter(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const std::vector<Segment> blocks = nodeBlocks(spec, bufferBytes(spec));
  Schedule schedule;
  schedule.algorithm = "scatter_direct";
  if (spec.self != spec.root) {
    Step receive;
    receive.recvFrom = static_cast<int>(spec.root);
    receive.recvData = blocks[spec.self].data;
    receive.recvBytes = blocks[spec.self].bytes;
    receive.landing = Landing::Direct;
    schedule.steps.push_back(receive);
    return schedule;
  }
  for (size_t s = 1; s < n; ++s) {
    const int to = ringNode(spec.root, static_cast<long>(s), n);
    Step send;
    send.sendTo = to;
    send.sendData = blocks[to].data;
    send.sendBytes = blocks[to].bytes;
    schedule.steps.push_back(send);
  }
  return schedule;
}

}  // namespace hc::coll::net
