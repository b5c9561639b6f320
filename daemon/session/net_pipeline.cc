// NetRunner (net_runner.h), the CPU-forwarding pipeline: a collective across daemons whose
// operands need staging (device memory, or the client's own memory) runs in slices
// (slice_staging.h). While the daemons exchange slice k on the progress thread, this (IPC) thread
// copies slice k-1's results out and slice k+1's operands in (the two directions side by side,
// on their own streams) and combines them, so copies overlap each other and the wire. After the
// last slice the daemons allgather one byte each, whether all their copies succeeded, and every
// rank of the op gets the same verdict.
#include <spdlog/spdlog.h>

#include "common/reduce/reduce.h"
#include "daemon/session/local_runner.h"
#include "daemon/session/net_runner.h"
#include "daemon/session/net_seq.h"
#include "daemon/session/validate.h"

namespace hc::session {

void NetRunner::startPipeline(const NetComm& net, NetRun run, uint64_t sliceBytes) {
  const PendingOp& head = run.match.ops.front();
  const size_t esz = dtypeSize(head.dtype);
  const int nranks = run.comm->nranks();
  run.pipeline = std::make_unique<Pipeline>();
  run.pipeline->staging = std::make_unique<staging::SliceStaging>(
      head.type, nranks, esz, head.count, staging::sliceCount(head.type, nranks, esz, sliceBytes),
      &context_.staging, &context_.copier);
  // Operands that share one device are combined there: one slice leaves the device for the whole
  // daemon instead of one per rank, and the host does not reduce them. Operands on several
  // devices are not: gathering them on one device costs a peer copy each, as much as the copy to
  // the host they would save unless the GPUs share a fast link, which the daemon cannot see;
  // each device's copy engine moves its own operands out side by side instead.
  const staging::ReductionPlacement combine =
      run.match.ops.size() > 1 ? staging::reductionPlacement(operandsOf(run.match))
                               : staging::ReductionPlacement{};
  if (combine.home != nullptr && !combine.spansDevices &&
      combine.home->capabilities().reduceKernels) {
    run.pipeline->combine = combine;
    if (context_.options.metrics != nullptr) {
      context_.options.metrics->deviceReduction(combine.spansDevices);
    }
    run.pipeline->staging->combineSends(
        [&copier = context_.copier, combine, nranks](const std::vector<staging::Operand>& ops,
                                                     uint64_t first, uint64_t count, uint8_t* out) {
          return staging::combineSlice(ops, combine, nranks, first, count, copier, out);
        });
  }
  auto first = planSlice(run, 0);
  if (!first.isOk()) {
    // No staging memory: this daemon cannot take part, and the others learn it from the notice.
    return failBeforeWire(run.comm, run.match, first.status());
  }
  run.plan = std::move(first.value());
  NetRun& live = submitSlice(net, std::move(run));
  prepareNextSlice(live);
}

Result<std::unique_ptr<coll::hier::NodePlan>> NetRunner::planSlice(NetRun& run, size_t k) {
  const PendingOp& head = run.match.ops.front();
  std::vector<coll::RankBuffers> bufs = matchBuffers(run.match);
  HC_RETURN_IF_ERROR(run.pipeline->staging->stageIn(operandsOf(run.match), k, bufs));
  // Also waits for the previous slice's copies out, which ran beside these.
  run.pipeline->staging->settle();
  coll::LocalOp lop{head.type, head.dtype, head.redop, head.root,
                    run.pipeline->staging->countOf(k)};
  auto plan = coll::hier::NodePlan::make(lop, *run.layout, std::move(bufs), &scratch_,
                                         run.pipeline->combine.home != nullptr);
  if (!plan.isOk()) return plan.status();
  (*plan)->before();
  return std::move(plan.value());
}

NetRunner::NetRun& NetRunner::submitSlice(const NetComm& net, NetRun run) {
  coll::net::NetJob job;
  job.spec = run.plan->spec();
  job.spec.comm = net.identity;
  job.spec.options = multiNode_.netOptions;
  job.spec.seq = collectiveSeq(run.match.seq);
  job.nodes = net.nodes;
  return submitNet(std::move(run), std::move(job));
}

void NetRunner::prepareNextSlice(NetRun& run) {
  Pipeline& p = *run.pipeline;
  const size_t k = p.running + 1;
  if (k >= p.staging->slices()) return p.staging->settle();
  auto plan = planSlice(run, k);
  if (!plan.isOk()) {
    // The running slice ends through the failure (notices stop the other daemons' side of it).
    spdlog::warn("communicator {:x}: op {}: slice {}: {}", run.comm->id(), run.match.seq, k,
                 plan.status().message());
    run.comm->fail(plan.status());
    return;
  }
  p.next = std::move(plan.value());
}

void NetRunner::onSliceDone(NetRun run, const Status& status) {
  Pipeline& p = *run.pipeline;
  auto net = netComms_.find(run.comm->id());
  Status failure = status;
  if (failure.isOk() && net == netComms_.end()) {
    failure = unavailable("the communicator went away");
  }
  if (failure.isOk() && run.comm->failed()) {
    // Failed here since the slice started (a client died, the next slice could not be
    // prepared): the other daemons hear it and abandon the op, so a next slice would wait on
    // them for ever.
    failure = run.comm->failure();
  }
  if (!failure.isOk()) {
    spdlog::warn("communicator {:x}: {} across daemons failed in slice {} of {}: {}",
                 run.comm->id(), opName(run.match.ops.front().type), p.running, p.staging->slices(),
                 failure.message());
    endNetRun(run, failure);
    return;
  }
  run.plan->after();
  run.plan.reset();  // its scratch goes back to the pool
  const size_t done = p.running;
  if (p.next == nullptr) {  // that was the last slice
    p.staging->stageOut(operandsOf(run.match), done);
    p.staging->settle();
    return startVerdict(net->second, std::move(run));
  }
  // The next slice goes on the wire first; this slice's copies out and the one after's copies in
  // run meanwhile.
  run.plan = std::move(p.next);
  ++p.running;
  NetRun& live = submitSlice(net->second, std::move(run));
  live.pipeline->staging->stageOut(operandsOf(live.match), done);
  prepareNextSlice(live);
}

void NetRunner::startVerdict(const NetComm& net, NetRun run) {
  run.kind = NetRun::Kind::Verdict;
  const uint8_t failed = run.pipeline->staging->failure().isOk() ? 0 : 1;
  exchange(net, std::move(run), &failed, 1);
}

void NetRunner::onVerdict(NetRun run, const Status& status) {
  std::string failedRanks;
  if (status.isOk()) {
    const auto& layout = *run.layout;
    for (uint32_t n = 0; n < layout.nodes() && n < run.notice.size(); ++n) {
      if (run.notice[n] == 0) continue;
      for (int r : layout.ranksOfNode[n]) {
        failedRanks += (failedRanks.empty() ? "" : ",") + std::to_string(r);
      }
    }
  }
  Status result = status;
  if (!failedRanks.empty()) {
    // Every daemon names the same ranks; the one that failed adds its device's words locally.
    const Status& mine = run.pipeline->staging->failure();
    std::string text = "op " + std::to_string(run.match.seq) +
                       ": staging device memory failed on the daemon of ranks " + failedRanks;
    if (!mine.isOk()) text += " (" + mine.message() + ")";
    result = Status{Code::DeviceError, text};
    spdlog::warn("communicator {:x}: {}", run.comm->id(), text);
    // As for a mismatch: every daemon reaches this same verdict, and a notice from here could
    // reach another daemon before its own verdict and give its ranks other words.
    if (auto net = netComms_.find(run.comm->id()); net != netComms_.end()) {
      net->second.notified = true;
    }
  } else if (!status.isOk()) {
    spdlog::warn("communicator {:x}: {} across daemons failed: {}", run.comm->id(),
                 opName(run.match.ops.front().type), status.message());
  }
  endNetRun(run, result);
}

}  // namespace hc::session
