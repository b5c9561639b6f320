#include "daemon/session/transfer_path.h"

#include <algorithm>

namespace hc::session {
namespace {

// The memory kind a transfer's device buffer goes to the transport as, when it goes in place:
// its device passed the direct probe and the message is long enough. Else staged.
std::optional<transport::MemoryKind> directKind(const PendingOp& op,
                                                const staging::DirectDevices& direct) {
  const bool send = op.type == OpType::Send;
  const DeviceRegionPtr& region = send ? op.sendRegion : op.recvRegion;
  const uint64_t bytes = (send ? op.sendRange : op.recvRange).bytes;
  if (region == nullptr || bytes < std::max<size_t>(direct.minBytes, 1)) return std::nullopt;
  return direct.kindOf(region->device());
}

}  // namespace

Status TransferPath::place(const Match& match, std::vector<coll::RankBuffers>& bufs,
                           StagedMatch& staged, Placement* placement) {
  const PendingOp& head = match.ops.front();
  const bool send = head.type == OpType::Send;
  const DeviceRegionPtr& region = send ? head.sendRegion : head.recvRegion;
  const PendingOp::ClientRange& range = send ? head.sendRange : head.recvRange;
  const staging::DirectDevices& direct = *options_.direct;
  uint8_t* where = nullptr;
  if (const auto kind = directKind(head, direct)) {
    // Lent to the transport where it lies: no copy on this side.
    placement->direct = true;
    placement->memory = *kind;
    where = region->data() + range.address;
    if (options_.metrics != nullptr) options_.metrics->deviceDirectTransfer();
  } else {
    if (region == nullptr || range.bytes == 0) {
      return staged.stageIn(match.ops, bufs, pool_, copier_);  // the client's own memory
    }
    // Device memory: copied on the progress thread, chunk by chunk beside the wire. At least four
    // copies, so that the first wire chunk leaves after a quarter of the copy time; long
    // transfers go through a ring of four copies of about devices.staging_chunk_bytes.
    const staging::StagingGeometry g = staging::stagingGeometry(
        range.bytes, options_.wireChunkBytes, options_.stagingChunkBytes, direct.minBytes);
    auto host = staged.reserve(g.hostBytes, pool_);
    if (!host.isOk()) return host.status();
    where = *host;
    placement->staged = staging::StagedTransferPlan{region->device(),
                                                    region->data() + range.address,
                                                    *host,
                                                    g.hostBytes,
                                                    range.bytes,
                                                    g.chunkBytes,
                                                    g.ringBytes,
                                                    &lanes_};
  }
  if (send) {
    bufs[0].send = where;
  } else {
    bufs[0].recv = where;
  }
  return okStatus();
}

}  // namespace hc::session
