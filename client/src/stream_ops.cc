#include "client/src/stream_ops.h"

#include <atomic>
#include <memory>
#include <set>
#include <utility>

#include "client/src/comm_state.h"
#include "client/src/submit.h"

namespace hc::client {
namespace {

// Where the submit step stands. The caller cancels it when the later steps cannot be enqueued;
// whichever of the two moves first from Pending decides.
enum class SubmitStep { Pending, Submitted, Cancelled };

// What the stream's host functions share; freed by finishFromStream, or by submitFromStream when
// cancelled.
struct StreamOp {
  Submission sub;
  RequestPtr request;
  DoneSlot slot;
  Connection* conn = nullptr;
  std::atomic<SubmitStep> step{SubmitStep::Pending};
};

void submitFromStream(void* arg) {
  auto* op = static_cast<StreamOp*>(arg);
  SubmitStep pending = SubmitStep::Pending;
  if (!op->step.compare_exchange_strong(pending, SubmitStep::Submitted)) {
    delete op;  // cancelled: nothing else refers to it
    return;
  }
  // op is not touched after this move: once the request completes the caller may free it.
  std::vector<Submission> one;
  one.push_back(std::move(op->sub));
  one.front().runtime = nullptr;  // submitted here, in stream order: not the group path
  // A failure finishes the request, which sets the flag the stream waits on next.
  (void)submitNow(one);
}

void finishFromStream(void* arg) {
  std::unique_ptr<StreamOp> op(static_cast<StreamOp*>(arg));
  // The flag is set, so the completion is in the ring or the request already failed locally.
  RequestPtr r = op->request;
  (void)op->conn->waitUntil([&r] { return r->done.load(std::memory_order_acquire); }, nullptr);
  // Only the daemon's completion finishes a request with success. A request failed here (abort,
  // dead daemon) may still be completed by the daemon later, which writes its flag: that flag is
  // never handed to another operation.
  if (r->status.isOk()) op->conn->doneFlags().release(op->slot);
}

Status attachFlag(Submission& sub, DoneSlot* slot) {
  auto acquired = sub.comm->conn->doneFlags().acquire(sub.runtime);
  if (!acquired.isOk()) return acquired.status();
  *slot = *acquired;
  sub.entry.doneFlag = slot->offset;
  sub.request->doneFlag = slot->flag;
  return okStatus();
}

// A device-resident scalar: copied on the stream, after the work queued before the operation,
// into the slot beside its flag, where the daemon reads it (the entry names it).
Status copyScalar(Submission& sub, const DoneSlot& slot) {
  if (sub.deviceScalar == nullptr) return okStatus();
  sub.entry.scalar = slot.offset + kDoneSlotScalarOffset;
  return sub.runtime->copyToHostAsync(sub.stream, slot.scalar(), sub.deviceScalar,
                                      sub.scalarBytes);
}

}  // namespace

Status submitOnStream(Submission sub) {
  DeviceRuntime* rt = sub.runtime;
  void* stream = sub.stream;
  auto op = std::make_unique<StreamOp>();
  op->conn = sub.comm->conn;
  op->request = sub.request;
  Status s = attachFlag(sub, &op->slot);
  if (!s.isOk()) {
    finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
    return s;
  }
  s = copyScalar(sub, op->slot);
  if (!s.isOk()) {
    finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
    op->conn->doneFlags().release(op->slot);
    return s;
  }
  op->sub = std::move(sub);
  StreamOp* raw = op.get();
  s = rt->launchHostFunc(stream, submitFromStream, raw);
  if (!s.isOk()) {
    finishRequest(raw->request, s, {}, FailureSeenBy::Caller);
    raw->conn->doneFlags().release(raw->slot);
    return s;
  }
  Status later = rt->waitValue32(stream, &raw->slot.flag->value, 1);
  if (later.isOk()) later = rt->launchHostFunc(stream, finishFromStream, raw);
  if (later.isOk()) {
    op.release();  // finishFromStream frees it
    return okStatus();
  }
  SubmitStep pending = SubmitStep::Pending;
  if (raw->step.compare_exchange_strong(pending, SubmitStep::Cancelled)) {
    // The submit step frees op when the stream reaches it; the flag stays out of the pool.
    finishRequest(raw->request, later, {}, FailureSeenBy::Caller);
    op.release();
    return later;
  }
  // Already submitted: the daemon runs it, and the stream does not wait for it. Waiting here
  // instead keeps the order for the caller's later work, which it queues after this returns.
  RequestPtr r = raw->request;
  (void)raw->conn->waitUntil([&r] { return r->done.load(std::memory_order_acquire); }, nullptr);
  if (r->status.isOk()) raw->conn->doneFlags().release(raw->slot);
  return okStatus();  // op is freed here: the submit step no longer refers to it
}

Status prepareGroupStreams(std::vector<Submission>& subs) {
  std::set<std::pair<DeviceRuntime*, void*>> waited;
  for (Submission& sub : subs) {
    if (!sub.onStream()) continue;
    if (waited.insert({sub.runtime, sub.stream}).second) {
      HC_RETURN_IF_ERROR(sub.runtime->synchronize(sub.stream));
    }
    DoneSlot slot;
    HC_RETURN_IF_ERROR(attachFlag(sub, &slot));
    if (sub.deviceScalar != nullptr) {
      // The stream is idle: the copy is done once it drains again.
      HC_RETURN_IF_ERROR(copyScalar(sub, slot));
      HC_RETURN_IF_ERROR(sub.runtime->synchronize(sub.stream));
    }
  }
  return okStatus();
}

void orderGroupStreams(std::vector<Submission>& subs) {
  for (Submission& sub : subs) {
    if (!sub.onStream()) continue;
    auto op = std::make_unique<StreamOp>();
    op->conn = sub.comm->conn;
    op->request = sub.request;
    op->slot = {sub.request->doneFlag, sub.entry.doneFlag};
    Status s = sub.runtime->waitValue32(sub.stream, &op->slot.flag->value, 1);
    if (s.isOk()) s = sub.runtime->launchHostFunc(sub.stream, finishFromStream, op.get());
    // Without its steps the stream does not wait for the operation; the request still reports it.
    if (s.isOk()) op.release();
  }
}

}  // namespace hc::client
