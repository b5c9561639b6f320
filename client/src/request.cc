#include "client/src/request.h"

#include "client/src/comm_state.h"
#include "client/src/staging.h"
#include "common/ipc/ring.h"

namespace hc::client {
namespace {

void foldPart(const RequestPtr& composite, const Status& status, FailureSeenBy seenBy) {
  if (!status.isOk()) {
    std::lock_guard<std::mutex> lock(composite->partsMutex);
    if (composite->firstPartError.isOk()) {
      composite->firstPartError = status;
      composite->firstPartSeenBy = seenBy;
    }
  }
  if (composite->partsLeft.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last part: every other part's fold happened before this decrement.
  Status first;
  FailureSeenBy firstSeenBy;
  {
    std::lock_guard<std::mutex> lock(composite->partsMutex);
    first = composite->firstPartError;
    firstSeenBy = composite->firstPartSeenBy;
  }
  finishRequest(composite, first, {}, firstSeenBy);
}

}  // namespace

RequestPtr makeRequest(const std::shared_ptr<CommState>& comm, bool tracked) {
  auto r = std::make_shared<Request>();
  r->comm = comm;
  r->tracked = tracked;
  if (comm) comm->outstanding.fetch_add(1);
  return r;
}

RequestPtr makeComposite(const std::shared_ptr<CommState>& comm, bool tracked) {
  RequestPtr r = makeRequest(comm, tracked);
  r->partsLeft.store(1);  // the seal's share: no part can finish the composite before the seal
  return r;
}

void addPart(const RequestPtr& composite, const RequestPtr& part) {
  composite->partsLeft.fetch_add(1);
  part->parent = composite;
}

void sealComposite(const RequestPtr& composite) {
  foldPart(composite, okStatus(), FailureSeenBy::Async);
}

void finishRequest(const RequestPtr& r, const Status& status, const CompletionInfo& info,
                   FailureSeenBy seenBy) {
  if (r->claimed.exchange(true, std::memory_order_acq_rel)) return;
  // The results reach the user's memory before anyone can see the request done. On failure the
  // user's buffer keeps what it held, as it would if the operation had never run.
  if (r->staging) r->staging->settle(status.isOk());
  r->staging.reset();
  r->status = status;
  r->result = info;
  RequestPtr parent = std::move(r->parent);
  std::shared_ptr<CommState> comm = r->comm;
  if (comm && !status.isOk() && !r->tracked && seenBy == FailureSeenBy::Async) {
    comm->setAsyncError(status);
  }
  if (r->doneFlag != nullptr) ipc::signalDone(r->doneFlag, static_cast<int32_t>(status.code()));
  r->done.store(true, std::memory_order_release);
  // After done: hc_comm_finalize returns only once every request it waited for is visible.
  if (comm && r->daemonOp) comm->daemonOps.fetch_sub(1);
  if (comm) comm->outstanding.fetch_sub(1);
  if (parent) foldPart(parent, status, seenBy);
}

}  // namespace hc::client
