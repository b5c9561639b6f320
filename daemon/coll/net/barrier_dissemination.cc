// Dissemination barrier: ceil(log2 N) rounds; in round r each node sends an empty message to
// node self + 2^r and waits for one from node self - 2^r before its next round's send. After
// round r a node has heard, directly or through others, from the 2^(r+1) - 1 nodes before it, so
// after the last round it knows every node has entered. Works for any N, no fold-in needed.
#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule disseminationBarrier(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  Schedule schedule;
  schedule.algorithm = "barrier_dissemination";
  for (size_t distance = 1; distance < n; distance *= 2) {
    Step round;
    round.sendTo = ringNode(spec.self, static_cast<long>(distance), n);
    round.sendsPreviousResult = !schedule.steps.empty();  // heard from the last round first
    round.recvFrom = ringNode(spec.self, -static_cast<long>(distance), n);
    round.landing = Landing::Direct;
    schedule.steps.push_back(round);
  }
  return schedule;
}

}  // namespace hc::coll::net
