// One pass of ScheduleRunner's Running phase: test what is pending, apply what arrived, post
// what the windows and dependencies allow. Testing comes before posting so that a pass frees
// every slot and window place it can before it tries to fill them.
#include <string>
#include <utility>

#include "common/reduce/reduce.h"
#include "daemon/coll/net/net_tags.h"
#include "daemon/coll/net/schedule_runner.h"

namespace hc::coll::net {
namespace {}  // namespace

Status ScheduleRunner::advance() {
  HC_RETURN_IF_ERROR(testWatches());
  HC_RETURN_IF_ERROR(testSends());
  HC_RETURN_IF_ERROR(testReceives());
  applyArrivedReceives();
  HC_RETURN_IF_ERROR(postReceives());
  return postSends();
}

// A notice receive that became final means a linked node failed: it either sent its notice or
// went away (the transport fails the receive with Unavailable).
Status ScheduleRunner::testWatches() {
  for (size_t i = 0; i < watches_.size(); ++i) {
    Result<bool> done = transport_.test(watches_[i].id);
    if (done.isOk() && !*done) continue;
    const size_t link = watches_[i].link;
    watches_.erase(watches_.begin() + static_cast<ptrdiff_t>(i));
    failedNode_ = linkedNodes_[link];
    if (!done.isOk()) return atNode(failedNode_, done.status());
    noticeFrom_ = static_cast<int>(link);
    return fromOpNotice(noticeInboxes_[link], failedNode_, peers_.size());
  }
  return okStatus();
}

Status ScheduleRunner::testSends() {
  for (size_t i = 0; i < sends_.size();) {
    Result<bool> done = transport_.test(sends_[i].id);
    if (done.isOk() && !*done) {
      ++i;
      continue;
    }
    const PendingSend sent = sends_[i];
    sends_.erase(sends_.begin() + static_cast<ptrdiff_t>(i));
    if (!done.isOk()) {
      failedNode_ = sent.node;
      return atNode(sent.node, done.status());
    }
    if (onSent_) onSent_(sent.offset, static_cast<size_t>(sent.end - sent.begin));
  }
  return okStatus();
}

// Marks arrived receives; a message of another size than the chunk means the nodes disagree on
// the operation (count, layout or root), which must fail rather than shift data silently.
Status ScheduleRunner::testReceives() {
  for (size_t i = 0; i < recvs_.size(); ++i) {
    PendingRecv& recv = recvs_[i];
    if (recv.arrived) continue;
    size_t bytes = 0;
    Result<bool> done = transport_.test(recv.id, &bytes);
    if (done.isOk() && !*done) continue;
    const Step& step = schedule_.steps[recv.step];
    if (!done.isOk()) {
      failedNode_ = step.recvFrom;
      recvs_.erase(recvs_.begin() + static_cast<ptrdiff_t>(i));
      return atNode(step.recvFrom, done.status());
    }
    const size_t expected = chunkEnd(step.recvBytes, recv.chunk) - chunkBegin(recv.chunk);
    if (bytes != expected) {
      failedNode_ = step.recvFrom;
      const size_t stepIndex = recv.step, chunk = recv.chunk;
      recvs_.erase(recvs_.begin() + static_cast<ptrdiff_t>(i));
      return atNode(
          step.recvFrom,
          Status(Code::RemoteError,
                 "sent " + std::to_string(bytes) + " B for step " + std::to_string(stepIndex) +
                     " chunk " + std::to_string(chunk) + ", expected " + std::to_string(expected) +
                     " B: the nodes disagree on the operation"));
    }
    recv.arrived = true;
  }
  return okStatus();
}

// Direct chunks already sit in place. Combine chunks are reduced into their region: the local
// bytes and the received ones in the schedule's operand order, the result over the local bytes;
// the finalizing reduction of an Avg sums and divides in the same pass. A region that a send of
// this step or an earlier one has yet to read waits for that send (recursive doubling sends its
// chunk k and reduces the partner's chunk k into the same bytes).
void ScheduleRunner::applyArrivedReceives() {
  for (size_t i = 0; i < recvs_.size();) {
    const PendingRecv recv = recvs_[i];
    if (!recv.arrived) {
      ++i;
      continue;
    }
    const Step& step = schedule_.steps[recv.step];
    if (step.landing == Landing::Combine) {
      uint8_t* begin = step.recvData + chunkBegin(recv.chunk);
      uint8_t* end = step.recvData + chunkEnd(step.recvBytes, recv.chunk);
      if (sendsStillRead(recv.step, begin, end)) {
        ++i;
        continue;
      }
      const void* inputs[2] = {begin, slot(recv.slot)};
      if (step.receivedFirst) std::swap(inputs[0], inputs[1]);
      void* output = begin;
      const bool divide = step.finalizes && divideWhenFinal_;
      const ReduceSpec spec{.dtype = dtype_,
                            .redop = divide ? RedOp::Avg : redop_,
                            .inputs = inputs,
                            .nInputs = 2,
                            .outputs = &output,
                            .nOutputs = 1,
                            .scalars = nullptr,
                            .nRanks = divide ? finalDivisor_ : 1};
      reduceRange(spec, 0, static_cast<size_t>(end - begin) / elementBytes_);
      freeSlots_.push_back(recv.slot);
    }
    applied_[recv.step][recv.chunk] = true;
    if (onLanded_ && step.landing == Landing::Direct) {
      const size_t begin = chunkBegin(recv.chunk);
      onLanded_(static_cast<size_t>(step.recvData - bufferStart_) + begin,
                chunkEnd(step.recvBytes, recv.chunk) - begin);
    }
    recvs_.erase(recvs_.begin() + static_cast<ptrdiff_t>(i));
  }
}

Status ScheduleRunner::postReceives() {
  while (recvs_.size() < maxInFlight_ && nextRecv_.step < schedule_.steps.size()) {
    const Step& step = schedule_.steps[nextRecv_.step];
    const size_t endOffset = chunkEnd(step.recvBytes, nextRecv_.chunk);
    // Bytes still in use by the owner (a ring's previous lap): this chunk waits for them.
    if (recvReady_ && endOffset > recvReady_()) break;
    uint8_t* begin = placed(step.recvData, chunkBegin(nextRecv_.chunk));
    uint8_t* end = begin + (endOffset - chunkBegin(nextRecv_.chunk));
    int slotIndex = -1;
    uint8_t* into = begin;
    if (step.landing == Landing::Combine) {
      if (freeSlots_.empty()) break;  // a slot frees when an earlier chunk is reduced
      slotIndex = freeSlots_.back();
      into = slot(slotIndex);
    } else if (sendsStillRead(nextRecv_.step, begin, end)) {
      break;  // these bytes are still to be sent; that happens without our help
    }
    const int node = step.recvFrom;
    Result<transport::RequestId> id = transport_.postRecv(
        peers_[node], dataTag(comm_, seq_, receivedOnLink_[node]), into,
        static_cast<size_t>(end - begin), slotIndex >= 0 ? transport::MemoryKind::Host : memory_);
    if (!id.isOk()) {
      failedNode_ = node;
      return atNode(node, id.status());
    }
    ++receivedOnLink_[node];
    if (slotIndex >= 0) freeSlots_.pop_back();
    recvs_.push_back(PendingRecv{*id, nextRecv_.step, nextRecv_.chunk, slotIndex});
    nextChunk(nextRecv_, recvChunks_);
  }
  return okStatus();
}

Status ScheduleRunner::postSends() {
  while (sends_.size() < maxInFlight_ && nextSend_.step < schedule_.steps.size()) {
    const size_t s = nextSend_.step;
    const Step& step = schedule_.steps[s];
    // A forwarded chunk leaves only once the previous step has produced it.
    if (step.sendsPreviousResult && !applied_[s - 1][nextSend_.chunk]) break;
    const size_t offset = chunkBegin(nextSend_.chunk);
    const size_t endOffset = chunkEnd(step.sendBytes, nextSend_.chunk);
    // A buffer still being filled: this chunk leaves once its bytes are there.
    if (sendReady_ && endOffset > sendReady_()) break;
    const uint8_t* begin = placed(step.sendData, offset);
    const uint8_t* end = begin + (endOffset - offset);
    const int node = step.sendTo;
    Result<transport::RequestId> id =
        transport_.postSend(peers_[node], dataTag(comm_, seq_, sentOnLink_[node]), begin,
                            static_cast<size_t>(end - begin), memory_);
    if (!id.isOk()) {
      failedNode_ = node;
      return atNode(node, id.status());
    }
    ++sentOnLink_[node];
    sends_.push_back(PendingSend{*id, node, begin, end, offset});
    nextChunk(nextSend_, sendChunks_);
  }
  return okStatus();
}

}  // namespace hc::coll::net
