// Point-to-point: one node sends its buffer to another, which receives it in place. Large
// buffers go as several chunks in flight, like any other schedule. Both ends must agree on the
// count: a shorter message fails the receiver with RemoteError, a longer one with TransportError.
#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {

Schedule pointToPoint(const NetOpSpec& spec) {
  const size_t bytes = spec.count * elementBytes(spec);
  Step step;
  if (spec.kind == NetOpKind::Send) {
    step.sendTo = static_cast<int>(spec.root);
    step.sendData = bufferBytes(spec);
    step.sendBytes = bytes;
  } else {
    step.recvFrom = static_cast<int>(spec.root);
    step.recvData = bufferBytes(spec);
    step.recvBytes = bytes;
    step.landing = Landing::Direct;
  }
  Schedule schedule;
  schedule.algorithm = spec.kind == NetOpKind::Send ? "send" : "recv";
  schedule.steps.push_back(step);
  return schedule;
}

}  // namespace hc::coll::net
