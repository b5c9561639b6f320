// The end of a communicator's life: ncclCommFinalize (non-blocking on a non-blocking
// communicator), ncclCommDestroy, ncclCommAbort, ncclCommRevoke (which stops its operations and
// leaves it a parent for ncclCommShrink), and ncclCommGetAsyncError, which reports a finalize
// still under way. Each keeps the side table (comm_table.h) in step with hc's handle.
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

using hc::shim::asHc;
using hc::shim::CommInfo;
using hc::shim::CommInfoPtr;
using hc::shim::fail;
using hc::shim::fromHc;

namespace {

// A non-blocking finalize: hc_comm_finalize waits for every operation issued on comm, so it runs
// on a thread of its own, which sleeps in hc's wait (no spinning) and ends when the operations
// have (or failed, or comm was aborted). The thread holds info, not the table's entry: an abort
// may drop the entry and end hc's handle while the thread still reports into info. The thread
// may even first run after ncclCommAbort returned: hc keeps an ended handle for the calls that
// still reach it, and its hc_comm_finalize then fails as aborted (hc.h, hc_comm_abort).
ncclResult_t startFinalize(ncclComm_t comm, const CommInfoPtr& info) {
  {
    std::lock_guard<std::mutex> lock(info->mutex);
    if (info->finalize != CommInfo::Finalize::NotStarted) {
      return fail(ncclInvalidUsage, "ncclCommFinalize was already called on this communicator");
    }
    info->finalize = CommInfo::Finalize::Running;
  }
  try {
    std::thread([comm, info] {
      const hc_status_t s = hc_comm_finalize(asHc(comm));
      // This thread's own text: comm may have been aborted, and freed, by now.
      std::string text = s != HC_OK ? hc_get_last_error(nullptr) : "";
      std::lock_guard<std::mutex> lock(info->mutex);
      info->finalizeStatus = s;
      info->finalizeError = std::move(text);
      info->finalize = CommInfo::Finalize::Done;
      info->finalized.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> lock(info->mutex);
    info->finalize = CommInfo::Finalize::NotStarted;
    return fail(ncclSystemError,
                std::string("ncclCommFinalize: no thread to finalize on: ") + e.what());
  }
  return ncclInProgress;
}

// A non-blocking communicator still initializing: hc_comm_finalize would return HC_IN_PROGRESS
// at once, and a thread would report that as the finalize's outcome forever.
bool stillInitializing(ncclComm_t comm) {
  hc_status_t async = HC_OK;
  return hc_comm_get_async_error(asHc(comm), &async) == HC_OK && async == HC_IN_PROGRESS;
}

}  // namespace

extern "C" {

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  hc::shim::info("comm " + hc::shim::pointerText(comm) + " - Finalize");
  const CommInfoPtr info = hc::shim::findComm(comm);
  if (info != nullptr && info->revoked.load()) {
    return fail(ncclInvalidUsage,
                "ncclCommFinalize after ncclCommRevoke: destroy or abort the communicator");
  }
  // Blocking: returns when every operation issued on comm has completed.
  if (info == nullptr || info->blocking) return fromHc(hc_comm_finalize(asHc(comm)), comm);
  if (stillInitializing(comm)) return hc::shim::notReady(comm);
  return startFinalize(comm, info);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  CommInfoPtr info = hc::shim::forgetComm(comm);
  if (info != nullptr) {
    // hc frees the handle the finalize thread waits on: let it finish first. Destroy may block,
    // as NCCL's does; a caller of a non-blocking communicator polls until finalize is done.
    std::unique_lock<std::mutex> lock(info->mutex);
    info->finalized.wait(lock, [&] { return info->finalize != CommInfo::Finalize::Running; });
  }
  const hc_status_t s = hc_comm_destroy(asHc(comm));
  // hc refuses, keeping the handle, while this thread's open group holds operations of comm.
  if (s == HC_INVALID_ARGUMENT && hc::shim::groupDepth() > 0 && info != nullptr) {
    hc::shim::rememberComm(comm, std::move(info));
  }
  return fromHc(s, nullptr);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  hc::shim::info("comm " + hc::shim::pointerText(comm) + " - Abort");
  // Out of the table before hc frees the handle: a thread that this abort wakes from a wait on
  // comm then reads only its own error text. Never blocks: a finalize thread, woken too, ends on
  // its own.
  (void)hc::shim::forgetComm(comm);
  return fromHc(hc_comm_abort(asHc(comm)), nullptr);
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommRevoke: comm is NULL");
  hc::shim::info("comm " + hc::shim::pointerText(comm) + " - Revoke");
  const hc_status_t s = hc_comm_revoke(asHc(comm), revokeFlags);
  if (s == HC_OK) {
    if (const CommInfoPtr info = hc::shim::findComm(comm)) info->revoked.store(true);
  }
  return fromHc(s, comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  }
  const CommInfoPtr info = hc::shim::findComm(comm);
  if (info != nullptr) {
    std::lock_guard<std::mutex> lock(info->mutex);
    if (info->finalize == CommInfo::Finalize::Running) {
      *asyncError = ncclInProgress;
      return ncclSuccess;
    }
    if (info->finalize == CommInfo::Finalize::Done && info->finalizeStatus != HC_OK) {
      *asyncError = fail(hc::shim::toNccl(info->finalizeStatus, info.get()), info->finalizeError);
      return ncclSuccess;
    }
  }
  hc_status_t async = HC_OK;
  const hc_status_t s = hc_comm_get_async_error(asHc(comm), &async);
  if (s != HC_OK) return fromHc(s, comm);
  if (async == HC_OK || async == HC_IN_PROGRESS) {
    *asyncError = hc::shim::toNccl(async, info.get());
  } else {
    // The error's words for ncclGetLastError, as from a call that failed with it.
    *asyncError = fromHc(async, comm);
  }
  return ncclSuccess;
}

}  // extern "C"

HC_NCCL_TWIN(ncclCommFinalize)
HC_NCCL_TWIN(ncclCommDestroy)
HC_NCCL_TWIN(ncclCommAbort)
HC_NCCL_TWIN(ncclCommRevoke)
HC_NCCL_TWIN(ncclCommGetAsyncError)
