#include "daemon/session/local_runner.h"

#include <cstring>

#include "common/reduce/reduce.h"
#include "daemon/session/session.h"
#include "daemon/staging/device_reduce.h"

namespace hc::session {

std::vector<coll::RankBuffers> matchBuffers(const Match& match) {
  std::vector<coll::RankBuffers> bufs;
  for (const auto& op : match.ops) {
    coll::RankBuffers b = op.buffers;
    // A buffer-resident scalar is read when the operation runs, as NCCL reads a device scalar.
    if (op.scalarSource != nullptr) {
      b.scalar = 0;
      std::memcpy(&b.scalar, op.scalarSource, dtypeSize(op.dtype));
    }
    bufs.push_back(b);
  }
  return bufs;
}

void LocalRunner::run(const std::shared_ptr<Communicator>& comm, Match match) {
  const PendingOp& head = match.ops.front();
  const EngineOptions& options = context_.options;
  // Device operands that take the host path, and why: a home device without reduction kernels,
  // or anything the devices cannot reduce by themselves (device_reduce.h).
  const char* fallback = "host_reduction";
  // Only device operands can reduce on a device (the head's send side first of all): host
  // matches skip building the data path's view of the ops.
  std::vector<staging::Operand> operands;
  if (head.sendRegion != nullptr) operands = operandsOf(match);
  const staging::ReductionPlacement placement =
      operands.empty() ? staging::ReductionPlacement{} : staging::reductionPlacement(operands);
  if (placement.home != nullptr) {
    if (placement.home->capabilities().reduceKernels) {
      if (options.metrics != nullptr) options.metrics->deviceReduction(placement.spansDevices);
      comm->finishMatch(match, staging::reduceOnDevice(operands, placement, context_.copier));
      return;
    }
    fallback = "no_reduce_kernels";
  }
  // A transfer is planned as the sender's copy into the receiver's buffer.
  const OpType type = isPointToPoint(head.type) ? OpType::Send : head.type;
  coll::LocalOp lop{type, head.dtype, head.redop, head.root, head.count};
  std::vector<coll::RankBuffers> bufs = matchBuffers(match);
  StagedMatch staged;
  Status in = staged.stageIn(match.ops, bufs, &context_.staging, &context_.copier);
  context_.observer.countStaging(match, fallback);
  if (!in.isOk()) {
    comm->finishMatch(match, in);
    return;
  }
  auto plan = std::make_unique<coll::LocalPlan>(lop, std::move(bufs), options.pieceBytes);
  if (pool_ == nullptr || plan->bytesMoved() <= options.inlineBytes || plan->pieces() < 2) {
    for (size_t i = 0; i < plan->pieces(); ++i) plan->runPiece(i);
    comm->finishMatch(match, staged.stageOut(match.ops));
    return;
  }
  uint64_t id = context_.nextRunId++;
  coll::LocalPlan* raw = plan.get();
  running_[id] = Running{comm, std::move(match), std::move(plan), std::move(staged)};
  pool_->submit(
      raw->pieces(), [raw](size_t i) { raw->runPiece(i); },
      [this, id] {
        {
          std::lock_guard<std::mutex> lock(finishedMutex_);
          finished_.push_back(id);
        }
        context_.wake();
      });
}

void LocalRunner::collectFinished() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(finishedMutex_);
    ids.swap(finished_);
  }
  for (uint64_t id : ids) finish(id);
}

void LocalRunner::finish(uint64_t runId) {
  auto it = running_.find(runId);
  if (it == running_.end()) return;
  auto comm = it->second.comm;
  comm->finishMatch(it->second.match, it->second.staged.stageOut(it->second.match.ops));
  for (auto& op : it->second.match.ops) op.session->flushCompletions();
  running_.erase(it);
  context_.progress(comm);
}

}  // namespace hc::session
