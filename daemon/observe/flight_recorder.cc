#include "daemon/observe/flight_recorder.h"

#include <algorithm>

namespace hc::observe {

const char* flightStateName(FlightState state) {
  switch (state) {
    case FlightState::Scheduled: return "scheduled";
    case FlightState::Started: return "started";
    case FlightState::Completed: return "completed";
    case FlightState::Failed: return "failed";
  }
  return "unknown";
}

std::string profilingName(const std::string& op) {
  struct Name {
    const char* ours;
    const char* pytorch;
  };
  static constexpr Name kNames[] = {
      {"allreduce", "all_reduce"}, {"allgather", "all_gather"},
      {"reduce_scatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
      {"broadcast", "broadcast"}, {"reduce", "reduce"},
      {"gather", "gather"}, {"scatter", "scatter"},
      {"send", "send"}, {"recv", "recv"},
      {"barrier", "barrier"}, {"comm_split", "comm_split"},
  };
  for (const Name& n : kNames) {
    if (op == n.ours) return std::string("nccl:") + n.pytorch;
  }
  return "nccl:" + op;
}

int64_t wallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             FlightRecorder::Clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(CommIdentity comm, size_t entriesPerRank)
    : comm_(std::move(comm)),
      capacity_(std::max<size_t>(1, entriesPerRank) * std::max<size_t>(1, comm_.localRanks.size())) {
  std::sort(comm_.localRanks.begin(), comm_.localRanks.end());
  for (int rank : comm_.localRanks) ranks_.push_back(RankProgress{.rank = rank});
}

const CommIdentity& FlightRecorder::identity() const { return comm_; }

RankProgress& FlightRecorder::progressLocked(int rank) {
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), rank,
                             [](const RankProgress& p, int r) { return p.rank < r; });
  if (it == ranks_.end() || it->rank != rank) it = ranks_.insert(it, RankProgress{.rank = rank});
  return *it;
}

FlightEntry* FlightRecorder::findLocked(uint64_t recordId) {
  if (entries_.empty() || recordId < entries_.front().recordId) return nullptr;  // evicted
  const uint64_t index = recordId - entries_.front().recordId;
  return index < entries_.size() ? &entries_[index] : nullptr;
}

uint64_t FlightRecorder::posted(FlightOp op) {
  std::lock_guard lock(mutex_);
  FlightEntry entry;
  entry.recordId = nextRecordId_++;
  // PyTorch's sequence ids count from 1; ours from 0.
  if (op.p2p) {
    entry.p2pSeqId = op.seq + 1;
  } else {
    entry.collectiveSeqId = op.seq + 1;
  }
  entry.profilingName = profilingName(op.op);
  entry.timeCreatedNs = wallClockNs();
  entry.what = std::move(op);
  RankProgress& progress = progressLocked(entry.what.rank);
  (entry.what.p2p ? progress.transfersPosted : progress.collectivesPosted)++;
  progress.lastPosted = entry;
  entries_.push_back(std::move(entry));
  if (entries_.size() > capacity_) entries_.pop_front();
  return nextRecordId_ - 1;
}

void FlightRecorder::started(uint64_t recordId) {
  std::lock_guard lock(mutex_);
  FlightEntry* entry = findLocked(recordId);
  if (entry == nullptr || entry->state != FlightState::Scheduled) return;
  entry->state = FlightState::Started;
  entry->timeDiscoveredStartedNs = wallClockNs();
  RankProgress& progress = progressLocked(entry->what.rank);
  if (progress.lastPosted && progress.lastPosted->recordId == recordId) progress.lastPosted = *entry;
}

void FlightRecorder::finished(uint64_t recordId, const Status& status) {
  std::optional<FlightEntry> done = finishLocked(recordId, status);
  if (done && sink_) sink_(*done, status);
}

std::optional<FlightEntry> FlightRecorder::finishLocked(uint64_t recordId, const Status& status) {
  std::lock_guard lock(mutex_);
  FlightEntry* entry = findLocked(recordId);
  // An evicted entry still counts: the totals are over the communicator's whole life. Its rank
  // and kind are unknown then, so only the totals move.
  status.isOk() ? ++opsCompleted_ : ++opsFailed_;
  if (entry == nullptr) return std::nullopt;
  if (entry->state == FlightState::Completed || entry->state == FlightState::Failed) {
    return std::nullopt;
  }
  const int64_t now = wallClockNs();
  if (entry->timeDiscoveredStartedNs == 0) entry->timeDiscoveredStartedNs = now;
  entry->timeDiscoveredCompletedNs = now;
  entry->state = status.isOk() ? FlightState::Completed : FlightState::Failed;
  if (status.isOk()) bytesCompleted_ += std::max(entry->what.bytesIn, entry->what.bytesOut);
  if (!status.isOk()) entry->error = status.toString();
  RankProgress& progress = progressLocked(entry->what.rank);
  (entry->what.p2p ? progress.transfersFinished : progress.collectivesFinished)++;
  if (progress.lastPosted && progress.lastPosted->recordId == recordId) progress.lastPosted = *entry;
  return *entry;
}

void FlightRecorder::commFailed(const Status& why) {
  std::lock_guard lock(mutex_);
  if (failure_.empty()) failure_ = why.toString();
}

FlightSnapshot FlightRecorder::snapshot(size_t lastN) const {
  std::lock_guard lock(mutex_);
  FlightSnapshot out;
  out.comm = comm_;
  out.state = failure_.empty() ? "active" : "failed";
  out.failure = failure_;
  out.opsCompleted = opsCompleted_;
  out.opsFailed = opsFailed_;
  out.bytesCompleted = bytesCompleted_;
  out.ranks = ranks_;
  if (progressSource_) progressSource_(&out.ranks);
  const size_t skip = lastN == 0 || lastN >= entries_.size() ? 0 : entries_.size() - lastN;
  out.entries.assign(entries_.begin() + static_cast<ptrdiff_t>(skip), entries_.end());
  return out;
}

}  // namespace hc::observe
