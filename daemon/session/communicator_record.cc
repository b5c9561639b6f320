// Communicator, as operators see it: the flight record of its operations, and the late report
// (the oldest unfinished operation waited past comm.late_report_ms).
#include <algorithm>

#include "common/reduce/reduce.h"
#include "daemon/session/communicator.h"
#include "daemon/session/validate.h"

namespace hc::session {
namespace {

// The shapes PyTorch would give the op's tensors: elements, as one dimension.
void shapesOf(const PendingOp& op, int nranks, observe::FlightOp& out) {
  const auto count = static_cast<int64_t>(op.count);
  const int64_t all = count * nranks;
  using T = OpType;
  switch (op.type) {
    case T::AllReduce:
    case T::Broadcast:
    case T::Reduce:
      out.inputSizes = out.outputSizes = {count};
      break;
    case T::AllGather:
    case T::Gather:
      out.inputSizes = {count};
      out.outputSizes = {all};
      break;
    case T::ReduceScatter:
    case T::Scatter:
      out.inputSizes = {all};
      out.outputSizes = {count};
      break;
    case T::AllToAll:
      out.inputSizes = out.outputSizes = {all};
      break;
    case T::Send:
      out.inputSizes = {count};
      break;
    case T::Recv:
      out.outputSizes = {count};
      break;
    default:
      break;  // barrier, split: no tensors
  }
}

}  // namespace

void Communicator::observe(std::shared_ptr<observe::FlightRecorder> recorder, std::string keyHex,
                           int lateReportMs, IncidentHandler onIncident) {
  recorder_ = std::move(recorder);
  if (area_ && recorder_) {
    recorder_->setProgressSource(
        [area = area_](std::vector<observe::RankProgress>* ranks) { area->addProgress(ranks); });
  }
  keyHex_ = std::move(keyHex);
  lateReportMs_ = lateReportMs;
  onIncident_ = std::move(onIncident);
}

std::vector<int> Communicator::localRanks() const {
  std::vector<int> out;
  for (size_t r = 0; r < remote_.size(); ++r) {
    if (!remote_[r]) out.push_back(static_cast<int>(r));
  }
  return out;
}

void Communicator::recordPosted(int rank, PendingOp& op) {
  if (!recorder_) return;
  observe::FlightOp f;
  f.rank = rank;
  f.op = opName(op.type);
  f.p2p = isPointToPoint(op.type);
  f.seq = op.seq;
  f.peer = f.p2p || (op.type == OpType::Broadcast || op.type == OpType::Reduce ||
                     op.type == OpType::Gather || op.type == OpType::Scatter)
               ? op.root
               : -1;
  if (op.type != OpType::Barrier && op.type != OpType::CommSplit) {
    f.dtype = dtypeName(op.dtype);
  }
  shapesOf(op, nranks(), f);
  const size_t element = dtypeSize(op.dtype);
  for (int64_t n : f.inputSizes) f.bytesIn += static_cast<uint64_t>(n) * element;
  for (int64_t n : f.outputSizes) f.bytesOut += static_cast<uint64_t>(n) * element;
  op.recordId = recorder_->posted(std::move(f));
}

void Communicator::recordFinished(const PendingOp& op, const Status& status) {
  if (recorder_ && op.recordId != PendingOp::kNoRecord) recorder_->finished(op.recordId, status);
}

const PendingOp* Communicator::oldestUnfinished(int* owner, bool* running) const {
  const PendingOp* oldest = nullptr;
  for (size_t r = 0; r < queues_.size(); ++r) {
    if (queues_[r].empty()) continue;
    const Unit& u = queues_[r].front();
    for (size_t i = 0; i < u.ops.size(); ++i) {
      if (u.states[i] == State::Finished) continue;
      if (oldest == nullptr || u.ops[i].postedAt < oldest->postedAt) {
        oldest = &u.ops[i];
        *owner = static_cast<int>(r);
        *running = u.states[i] == State::Running;
      }
    }
  }
  return oldest;
}

std::optional<std::chrono::steady_clock::time_point> Communicator::lateDeadline() const {
  if (lateReportMs_ <= 0 || !onIncident_ || failed()) return std::nullopt;
  int owner = 0;
  bool running = false;
  const PendingOp* oldest = oldestUnfinished(&owner, &running);
  if (oldest == nullptr || oldest->recordId == lateReported_) return std::nullopt;
  return oldest->postedAt + std::chrono::milliseconds(lateReportMs_);
}

void Communicator::checkLate(std::chrono::steady_clock::time_point now) {
  auto due = lateDeadline();
  if (!due || now < *due) return;
  int owner = 0;
  bool running = false;
  const PendingOp* oldest = oldestUnfinished(&owner, &running);
  lateReported_ = oldest->recordId;
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - oldest->postedAt).count();
  std::string detail;
  if (running) {
    // Every local rank posted it: what it waits for is on other daemons.
    detail = "op " + std::to_string(oldest->seq) + " (" + describeOp(*oldest) + " of rank " +
             std::to_string(owner) + ") has run for " + std::to_string(waited) +
             " ms: this daemon's ranks posted it and wait for other daemons (hcctl trace " +
             keyHex_ + " names the ranks that have not)";
  } else {
    detail = waitingFor() + " after " + std::to_string(waited) + " ms";
  }
  onIncident_(*this, "late", detail);
}

}  // namespace hc::session
