// NetRunner (net_runner.h), transfers between daemons: a send or receive whose other half runs
// on another daemon. Where the buffer meets the wire is TransferPath's choice (transfer_path.h):
// lent to the transport in place, staged beside the wire on the progress thread, or staged
// before the op on the IPC thread (the client's own memory); this runs the NetOp.
#include <spdlog/spdlog.h>

#include "daemon/session/local_runner.h"
#include "daemon/session/net_runner.h"

namespace hc::session {

void NetRunner::runTransfer(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                            Match match) {
  const PendingOp& head = match.ops.front();
  std::vector<coll::RankBuffers> bufs = matchBuffers(match);
  StagedMatch staged;
  TransferPath::Placement placement;
  Status in = transfers_.place(match, bufs, staged, &placement);
  if (!placement.direct) context_.observer.countStaging(match, "transport_host_only");
  if (!in.isOk()) {
    // The other half of a transfer runs on another daemon, which no agreement tells: the
    // communicator fails, and its notice reaches every daemon of it.
    spdlog::warn("communicator {:x}: {}", comm->id(), in.message());
    return failBeforeWire(comm, match, in);
  }
  coll::LocalOp lop{head.type, head.dtype, head.redop, head.root, head.count};
  auto plan = coll::hier::NodePlan::make(lop, *net.layout, std::move(bufs), &scratch_);
  if (!plan.isOk()) return failBeforeWire(comm, match, plan.status());
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
