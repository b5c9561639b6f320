#include "daemon/coll/net/schedule_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/reduce/reduce.h"
#include "daemon/coll/net/net_tags.h"

namespace hc::coll::net {
namespace {}  // namespace

ScheduleRunner::ScheduleRunner(const NetOpSpec& spec, Schedule schedule)
    : transport_(*spec.transport),
      peers_(spec.peers),
      self_(spec.self),
      comm_(spec.comm),
      seq_(spec.seq),
      memory_(spec.memory),
      minTail_(spec.kind == NetOpKind::Send || spec.kind == NetOpKind::Recv
                   ? spec.transport->directMinBytes()
                   : 0),
      sendReady_(spec.sendReady),
      onLanded_(spec.onLanded),
      onSent_(spec.onSent),
      recvReady_(spec.recvReady),
      ring_(spec.ringBytes),
      bufferStart_(static_cast<const uint8_t*>(spec.buffer)),
      dtype_(spec.dtype),
      redop_(interNodeRedop(spec.redop)),
      divideWhenFinal_((spec.kind == NetOpKind::AllReduce || spec.kind == NetOpKind::Reduce ||
                        spec.kind == NetOpKind::ReduceScatter) &&
                       spec.redop == RedOp::Avg),
      finalDivisor_(spec.finalDivisor),
      elementBytes_(std::max<size_t>(dtypeSize(spec.dtype), 1)),
      chunkBytes_(std::max(spec.options.chunkBytes / elementBytes_, size_t{1}) * elementBytes_),
      maxInFlight_(std::max<size_t>(spec.options.maxInFlight, 1)),
      schedule_(std::move(schedule)),
      sentOnLink_(peers_.size(), 0),
      receivedOnLink_(peers_.size(), 0) {
  const size_t nSteps = schedule_.steps.size();
  sendChunks_.resize(nSteps, 0);
  recvChunks_.resize(nSteps, 0);
  applied_.resize(nSteps);
  std::vector<bool> linked(peers_.size(), false);
  for (size_t s = 0; s < nSteps; ++s) {
    const Step& step = schedule_.steps[s];
    if (step.sendTo >= 0) {
      sendChunks_[s] = chunkCount(step.sendBytes);
      linked[step.sendTo] = true;
    }
    if (step.recvFrom >= 0) {
      recvChunks_[s] = chunkCount(step.recvBytes);
      applied_[s].assign(recvChunks_[s], false);
      linked[step.recvFrom] = true;
    }
    // A forwarded chunk is the one the previous step received: same region size, same cut.
    if (step.sendsPreviousResult) HC_CHECK(s > 0 && recvChunks_[s - 1] == sendChunks_[s]);
  }
  linked[self_] = false;
  for (size_t node = 0; node < linked.size() && spec.failureNotices; ++node) {
    if (linked[node]) linkedNodes_.push_back(static_cast<int>(node));
  }
  noticeInboxes_.assign(linkedNodes_.size(), OpNotice{});
  // Both cursors start at the first step that has chunks of their kind.
  nextSend_ = Cursor{0, 0};
  nextRecv_ = Cursor{0, 0};
  while (nextSend_.step < nSteps && sendChunks_[nextSend_.step] == 0) ++nextSend_.step;
  while (nextRecv_.step < nSteps && recvChunks_[nextRecv_.step] == 0) ++nextRecv_.step;
}

ScheduleRunner::~ScheduleRunner() {
  // The transport may still write into our scratch or read the caller's buffer otherwise.
  HC_CHECK(phase_ == Phase::Created || phase_ == Phase::Finished);
}

// ---- the outward calls -----------------------------------------------------------------------

Status ScheduleRunner::start() {
  // Aborted before it started: nothing to do; progress() reports the abort.
  if (phase_ == Phase::Finished && !outcome_.isOk()) return okStatus();
  if (phase_ != Phase::Created) {
    return invalidArgument(std::string(algorithm()) + ": started twice");
  }
  phase_ = Phase::Running;

  // Scratch: one slot per receive in flight that is reduced, each as large as its largest chunk.
  size_t combineChunks = 0;
  for (size_t s = 0; s < schedule_.steps.size(); ++s) {
    const Step& step = schedule_.steps[s];
    if (step.recvFrom < 0 || step.landing != Landing::Combine) continue;
    combineChunks += recvChunks_[s];
    slotBytes_ = std::max(slotBytes_, std::min(step.recvBytes, chunkBytes_));
  }
  const size_t slots = std::min(combineChunks, maxInFlight_);
  if (slots > 0 && slotBytes_ > 0) {
    scratch_ = std::make_unique_for_overwrite<uint8_t[]>(slots * slotBytes_);
  }
  for (size_t i = 0; i < slots; ++i) freeSlots_.push_back(static_cast<int>(slots - 1 - i));

  // Local work first: it needs nobody.
  for (const LocalCopy& copy : schedule_.localCopies) {
    void* to = copy.to;
    copyRange(copy.from, &to, 1, 0, copy.bytes);
  }
  if (divideWhenFinal_ && schedule_.finalizeBytes > 0) {
    const void* input = schedule_.finalizeAtStart;
    void* output = schedule_.finalizeAtStart;
    const ReduceSpec spec{.dtype = dtype_,
                          .redop = RedOp::Avg,
                          .inputs = &input,
                          .nInputs = 1,
                          .outputs = &output,
                          .nOutputs = 1,
                          .scalars = nullptr,
                          .nRanks = finalDivisor_};
    reduceRange(spec, 0, schedule_.finalizeBytes / elementBytes_);
  }

  // Listen for failure notices before any data moves, so that none can be missed.
  for (size_t i = 0; i < linkedNodes_.size(); ++i) {
    const int node = linkedNodes_[i];
    Result<transport::RequestId> id = transport_.postRecv(peers_[node], noticeTag(comm_, seq_),
                                                          &noticeInboxes_[i], sizeof(OpNotice));
    if (!id.isOk()) {
      failedNode_ = node;
      fail(atNode(node, id.status()));
      return okStatus();
    }
    watches_.push_back(Watch{*id, i});
  }
  Status first = advance();
  if (!first.isOk()) fail(std::move(first));
  return okStatus();
}

Result<bool> ScheduleRunner::progress() {
  switch (phase_) {
    case Phase::Created:
      return invalidArgument(std::string(algorithm()) + ": progress() before start()");
    case Phase::Running: {
      Status status = advance();
      if (!status.isOk()) {
        fail(std::move(status));
      } else if (dataDone()) {
        // Success: the notice receives are no longer needed. Cancelled, they are final after
        // the next transport->progress().
        for (const Watch& watch : watches_) (void)transport_.cancel(watch.id);
        phase_ = Phase::Draining;
      }
      break;
    }
    case Phase::Draining:
    case Phase::Finished:
      break;
  }
  if (phase_ == Phase::Draining && drain()) phase_ = Phase::Finished;
  if (phase_ != Phase::Finished) return false;
  if (!outcome_.isOk()) return outcome_;
  return true;
}

void ScheduleRunner::abort(Status why) {
  if (why.isOk()) why = unavailable("aborted");
  if (phase_ == Phase::Created) {
    outcome_ = std::move(why);
    phase_ = Phase::Finished;
  } else if (phase_ == Phase::Running) {
    // A node's failure notice already here is the earlier failure, and the one with the words:
    // the owner often aborts because that node's communicator failed, which it hears after.
    Status heard = testWatches();
    fail(heard.isOk() ? std::move(why) : std::move(heard));
  }
}

// ---- failure ---------------------------------------------------------------------------------

void ScheduleRunner::fail(Status why) {
  HC_CHECK(phase_ == Phase::Running);
  outcome_ = std::move(why);
  phase_ = Phase::Draining;
  // Tell every node we exchange with, so that none waits on us; the node that failed us already
  // knows, or is gone. A notice that cannot be posted (that node is gone too) is no loss.
  outgoing_ = noticeFrom_ >= 0 ? noticeInboxes_[static_cast<size_t>(noticeFrom_)]
                               : makeOpNotice(static_cast<int>(self_), outcome_);
  for (int node : linkedNodes_) {
    if (node == failedNode_) continue;
    Result<transport::RequestId> id =
        transport_.postSend(peers_[node], noticeTag(comm_, seq_), &outgoing_, sizeof(outgoing_));
    if (id.isOk()) noticeSends_.push_back(*id);
  }
  // Ask every pending request to stop; each stays lent until test() reports it final. A cancel
  // fails only for a request that is already final, which the drain collects the same way.
  // Receives already tested final are the transport's no more.
  std::erase_if(recvs_, [](const PendingRecv& recv) { return recv.arrived; });
  for (const PendingSend& send : sends_) (void)transport_.cancel(send.id);
  for (const PendingRecv& recv : recvs_) (void)transport_.cancel(recv.id);
  for (const Watch& watch : watches_) (void)transport_.cancel(watch.id);
}

bool ScheduleRunner::drain() {
  // Outcomes no longer matter, only finality: an error is as final as a success.
  auto isFinal = [this](transport::RequestId id) {
    Result<bool> done = transport_.test(id);
    return !done.isOk() || *done;
  };
  std::erase_if(sends_, [&](const PendingSend& s) { return isFinal(s.id); });
  std::erase_if(recvs_, [&](const PendingRecv& r) { return isFinal(r.id); });
  std::erase_if(watches_, [&](const Watch& w) { return isFinal(w.id); });
  std::erase_if(noticeSends_, isFinal);
  return sends_.empty() && recvs_.empty() && watches_.empty() && noticeSends_.empty();
}

Status ScheduleRunner::atNode(int node, const Status& status) const {
  return Status(status.code(), std::string(algorithm()) + ": node " + std::to_string(node) + ": " +
                                   status.message());
}

// ---- chunks ----------------------------------------------------------------------------------

size_t ScheduleRunner::chunkCount(size_t bytes) const {
  if (bytes == 0) return 1;
  const size_t count = (bytes + chunkBytes_ - 1) / chunkBytes_;
  const size_t tail = bytes - (count - 1) * chunkBytes_;
  return count > 1 && tail < minTail_ ? count - 1 : count;
}

size_t ScheduleRunner::chunkEnd(size_t bytes, size_t chunk) const {
  return chunk + 1 == chunkCount(bytes) ? bytes : std::min(bytes, (chunk + 1) * chunkBytes_);
}

void ScheduleRunner::nextChunk(Cursor& cursor, const std::vector<size_t>& counts) const {
  if (++cursor.chunk < counts[cursor.step]) return;
  cursor.chunk = 0;
  do {
    ++cursor.step;
  } while (cursor.step < counts.size() && counts[cursor.step] == 0);
}

bool ScheduleRunner::sendsStillRead(size_t step, const uint8_t* begin, const uint8_t* end) const {
  if (begin == end) return false;  // an empty message writes nothing
  auto overlaps = [&](const uint8_t* from, const uint8_t* to) { return begin < to && from < end; };
  // Posted and not final yet.
  for (const PendingSend& send : sends_) {
    if (overlaps(send.begin, send.end)) return true;
  }
  // Not posted yet, in this step or an earlier one (later steps send what we write here). Steps
  // before the send cursor are fully posted, so only [cursor step, step] can still have some.
  for (size_t t = nextSend_.step; t <= step && t < schedule_.steps.size(); ++t) {
    const Step& earlier = schedule_.steps[t];
    if (earlier.sendTo < 0) continue;
    const size_t firstUnposted = t == nextSend_.step ? chunkBegin(nextSend_.chunk) : 0;
    if (overlaps(earlier.sendData + firstUnposted, earlier.sendData + earlier.sendBytes)) {
      return true;
    }
  }
  return false;
}

bool ScheduleRunner::dataDone() const {
  return nextSend_.step >= schedule_.steps.size() && nextRecv_.step >= schedule_.steps.size() &&
         sends_.empty() && recvs_.empty();
}

}  // namespace hc::coll::net
