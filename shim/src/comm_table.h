// The shim's side table: what it must remember per communicator that hc's handle does not carry
// (the caller's blocking mode and ncclConfig_t version, the library that made it), and the state
// of a non-blocking ncclCommFinalize. Init and split add an entry; destroy and abort remove it
// before hc frees the handle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "shim/src/shim.h"

namespace hc::shim {

enum class Library { Nccl, Rccl };
// The library this file is linked into (library_nccl.cc or library_rccl.cc).
Library thisLibrary();

struct CommInfo {
  bool blocking = true;
  // The ncclConfig_t version the caller passed; 0 when it passed none (ncclCommInitRank), so the
  // header it was built against is unknown.
  unsigned configVersion = 0;
  Library library = Library::Nccl;
  // ncclCommRevoke was called: its finalize is refused (NCCL's rule), destroy or abort remain.
  std::atomic<bool> revoked{false};

  // A non-blocking ncclCommFinalize runs hc_comm_finalize on a thread of its own, so the caller
  // returns at once and ncclCommGetAsyncError reads the outcome here.
  enum class Finalize { NotStarted, Running, Done };
  std::mutex mutex;  // guards the fields below
  Finalize finalize = Finalize::NotStarted;
  hc_status_t finalizeStatus = HC_OK;
  std::string finalizeError;
  std::condition_variable finalized;  // notified when finalize becomes Done
};
using CommInfoPtr = std::shared_ptr<CommInfo>;

// Any thread. A handle already in the table is replaced (hc reused a freed handle's address).
void rememberComm(ncclComm_t comm, CommInfoPtr info);
// The entry of comm, or null when it has none (destroyed, aborted, or a failed blocking init).
CommInfoPtr findComm(ncclComm_t comm);
// Removes comm's entry and returns it. Call before hc_comm_destroy / hc_comm_abort frees the
// handle: a thread that holds a CommLookup of comm then never reads a freed handle.
CommInfoPtr forgetComm(ncclComm_t comm);

// Holds the table's lock for its lifetime. While info() is not null, comm is in the table, so
// hc's handle is alive (destroy and abort remove the entry first) and may be read, as
// hc_get_last_error(comm) does. Keep it short: it serializes every lookup.
class CommLookup {
 public:
  explicit CommLookup(ncclComm_t comm);
  const CommInfo* info() const { return info_; }

 private:
  std::unique_lock<std::mutex> lock_;
  const CommInfo* info_ = nullptr;
};

}  // namespace hc::shim
