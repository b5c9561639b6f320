// PendingOp: one rank's validated submission, in daemon memory, waiting for its peers.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/ipc/protocol.h"
#include "daemon/coll/local_plan.h"
#include "daemon/session/device_regions.h"
#include "daemon/session/process_memory.h"
#include "daemon/session/segment.h"
#include "daemon/staging/operand.h"

namespace hc::session {

class Session;

struct PendingOp {
  uint64_t requestId = 0;
  std::shared_ptr<Session> session;
  OpType type = OpType::Barrier;
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;
  int root = -1;  // root of rooted collectives; the peer of Send and Recv
  uint64_t count = 0;
  coll::RankBuffers buffers;
  // PreMulSum with a buffer-resident scalar: read when the operation runs; else null.
  const uint8_t* scalarSource = nullptr;
  // Parts in the client's own memory (MemKind::ProcessMemory): staged in daemon memory when the
  // op runs; buffers.send / buffers.recv point into the staging then.
  struct ClientRange {
    uint64_t address = 0;
    uint64_t bytes = 0;
    bool used() const { return bytes != 0; }
  };
  ClientRange sendRange;
  ClientRange recvRange;
  std::shared_ptr<const ProcessMemory> processMemory;
  // Parts in device memory (MemKind::Device): the range's address is an offset into the region.
  // Staged through host memory like client memory: copied in before the op runs, out after.
  DeviceRegionPtr sendRegion;
  DeviceRegionPtr recvRegion;
  int splitColor = ipc::kSplitNoColor;  // CommSplit
  int splitKey = 0;
  SegmentPtr segment;  // keeps the mapping alive while the op may touch it
  std::chrono::steady_clock::time_point postedAt;
  // Set by the communicator when the op's unit is queued: the collective sequence number, or
  // the sequence number among this rank's sends to (receives from) the peer.
  uint64_t seq = 0;
  // The op's entry in the communicator's flight recorder (FlightRecorder::posted); kNoRecord
  // until the op is queued, or when the communicator keeps no record.
  static constexpr uint64_t kNoRecord = UINT64_MAX;
  uint64_t recordId = kNoRecord;
};

// The op as the device and wire data path sees it (daemon/staging/operand.h): a view that borrows
// from `op`, valid while op lives. `rank` is the op's rank in its communicator.
inline staging::Operand operandOf(const PendingOp& op, int rank) {
  auto side = [](const DeviceRegionPtr& region, const PendingOp::ClientRange& range) {
    staging::OperandSide s;
    if (region != nullptr) {
      s.device = region->device();
      s.region = region->data();
    }
    s.address = range.address;
    s.bytes = range.bytes;
    return s;
  };
  staging::Operand o;
  o.type = op.type;
  o.dtype = op.dtype;
  o.redop = op.redop;
  o.root = op.root;
  o.count = op.count;
  o.rank = rank;
  o.buffers = op.buffers;
  o.scalarSource = op.scalarSource;
  o.send = side(op.sendRegion, op.sendRange);
  o.recv = side(op.recvRegion, op.recvRange);
  o.client = op.processMemory.get();
  return o;
}

}  // namespace hc::session
