// PendingOp: one rank's validated submission, in daemon memory, waiting for its peers.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/ipc/protocol.h"
#include "daemon/coll/local_plan.h"
#include "daemon/session/segment.h"

namespace hc::session {

class Session;

struct PendingOp {
  uint64_t requestId = 0;
  std::shared_ptr<Session> session;
  ipc::OpType type = ipc::OpType::Barrier;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  int root = -1;
  uint64_t count = 0;
  coll::RankBuffers buffers;
  SegmentPtr segment;  // keeps the mapping alive while the op may touch it
  std::chrono::steady_clock::time_point postedAt;
};

}  // namespace hc::session
