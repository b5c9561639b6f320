// The engine's transfers between daemons: a send or receive whose other half runs on another
// daemon. Where the buffer meets the wire is chosen here (Engine::placeTransfer): lent to the
// transport in place, staged beside the wire on the progress thread (staged_transfer.h), or
// staged before the op on the IPC thread (the client's own memory).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/session/engine.h"

namespace hc::session {
namespace {

// The memory kind a transfer's device buffer goes to the transport as, when it goes in place:
// its device passed the direct probe and the message is long enough. Else staged.
std::optional<transport::MemoryKind> directKind(const PendingOp& op, const DirectDevices& direct) {
  const bool send = op.type == ipc::OpType::Send;
  const DeviceRegionPtr& region = send ? op.sendRegion : op.recvRegion;
  const uint64_t bytes = (send ? op.sendRange : op.recvRange).bytes;
  if (region == nullptr || bytes < std::max<size_t>(direct.minBytes, 1)) return std::nullopt;
  return direct.kindOf(region->device());
}

}  // namespace

Status Engine::placeTransfer(const Match& match, std::vector<coll::RankBuffers>& bufs,
                             StagedMatch& staged, TransferPlacement* placement) {
  const PendingOp& head = match.ops.front();
  const bool send = head.type == ipc::OpType::Send;
  const DeviceRegionPtr& region = send ? head.sendRegion : head.recvRegion;
  const PendingOp::ClientRange& range = send ? head.sendRange : head.recvRange;
  uint8_t* where = nullptr;
  if (const auto kind = directKind(head, multiNode_.direct)) {
    // Lent to the transport where it lies: no copy on this side.
    placement->memory = *kind;
    where = region->data() + range.address;
    if (options_.metrics != nullptr) options_.metrics->deviceDirectTransfer();
  } else {
    countStaging(match, "transport_host_only");
    if (region == nullptr || range.bytes == 0) {
      return staged.stageIn(match.ops, bufs, &staging_, &copier_);  // the client's own memory
    }
    // Device memory: copied on the progress thread, chunk by chunk beside the wire. At least four
    // copies, so that the first wire chunk leaves after a quarter of the copy time; long
    // transfers go through a ring of four copies of about devices.staging_chunk_bytes.
    const StagingGeometry g =
        stagingGeometry(range.bytes, multiNode_.netOptions.chunkBytes, options_.stagingChunkBytes,
                        multiNode_.direct.minBytes);
    auto host = staged.reserve(g.hostBytes, &staging_);
    if (!host.isOk()) return host.status();
    where = *host;
    placement->staged = StagedTransferPlan{region->device(),
                                           region->data() + range.address,
                                           *host,
                                           g.hostBytes,
                                           range.bytes,
                                           g.chunkBytes,
                                           g.ringBytes,
                                           &transferLanes_};
  }
  if (send) {
    bufs[0].send = where;
  } else {
    bufs[0].recv = where;
  }
  return okStatus();
}

void Engine::transferAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                                 Match match) {
  const PendingOp& head = match.ops.front();
  std::vector<coll::RankBuffers> bufs = matchBuffers(match);
  StagedMatch staged;
  TransferPlacement placement;
  Status in = placeTransfer(match, bufs, staged, &placement);
  if (!in.isOk()) {
    // The other half of a transfer runs on another daemon, which no agreement tells: the
    // communicator fails, and its notice reaches every daemon of it.
    spdlog::warn("communicator {:x}: {}", comm->id(), in.message());
    comm->finishMatch(match, in);
    comm->fail(in);
    progress(comm);
    return;
  }
  coll::LocalOp lop{head.type, head.dtype, head.redop, head.root, head.count};
  auto plan = coll::hier::NodePlan::make(lop, *net.layout, std::move(bufs), &scratch_);
  if (!plan.isOk()) {
    comm->finishMatch(match, plan.status());
    comm->fail(plan.status());
    progress(comm);
    return;
  }
  NetRun run;
  run.plan = std::move(plan.value());
  run.comm = comm;
  run.match = std::move(match);
  run.layout = net.layout;
  run.staged = std::move(staged);
  run.memory = placement.memory;
  run.stagedTransfer = placement.staged;
  startNetOp(net, std::move(run));
}

}  // namespace hc::session
