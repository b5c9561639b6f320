// Request: one operation as the caller sees it. It turns done exactly once: when the daemon
// completed it, when its communicator or connection failed it, or when its group could not be
// submitted. A composite request (hc_alltoallv) is done when every one of its parts is.
//
// Whoever finishes a request first wins (finishRequest claims it); later finishers are no-ops.
// That is what lets an abort, a dead daemon and the completion ring race without double counting.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/ipc/protocol.h"
#include "common/status.h"

namespace hc::client {

struct CommState;
class Staging;

// What a completion carries besides its status.
struct CompletionInfo {
  uint64_t value = 0;  // CommInit / CommSplit: the daemon's communicator handle
  int32_t rank = 0;    // CommSplit: the caller's rank in the new communicator
  int32_t nranks = 0;  // CommSplit: its size
};

// Who learns about a failure. Caller: the API call that failed returns it (hc_group_end, an
// immediate submission), so it is not also recorded as the communicator's asynchronous error.
enum class FailureSeenBy { Async, Caller };

struct Request {
  uint64_t id = 0;                  // the wire id once submitted; stays 0 for composites
  std::shared_ptr<CommState> comm;  // null for requests of no communicator (init, destroy)
  bool tracked = true;              // false: the caller passed no request handle

  // Set last, with release order: a thread that sees it sees status, result and the user's data.
  std::atomic<bool> done{false};
  Status status;          // valid once done
  CompletionInfo result;  // valid once done

  // Held until the request finishes: the results to copy into user memory first.
  std::shared_ptr<Staging> staging;
  // The composite this request is a part of.
  std::shared_ptr<Request> parent;
  // Stream-ordered operations: the flag the caller's stream waits on. finishRequest sets it on
  // every path (the daemon sets it first on completion), so no stream waits on a failed party.
  ipc::DoneFlag* doneFlag = nullptr;
  // Counted in the communicator's daemonOps until it finishes.
  bool daemonOp = false;
  // Carried by the communicator's small-operation area (small_ops.h).
  bool smallOp = false;

  // Internal bookkeeping.
  std::atomic<bool> claimed{false};
  std::atomic<int> partsLeft{0};  // composites: unfinished parts + 1 until sealed
  std::mutex partsMutex;          // composites: guards firstPartError
  Status firstPartError;
  FailureSeenBy firstPartSeenBy = FailureSeenBy::Async;
};
using RequestPtr = std::shared_ptr<Request>;

// A request of comm (null: of no communicator). It counts in comm's outstanding operations from
// now until it finishes, so hc_comm_finalize also waits for copies out of staging.
RequestPtr makeRequest(const std::shared_ptr<CommState>& comm, bool tracked);

// A composite: add its parts, then seal it. It finishes after the seal and its last part; its
// status is the first failure among the parts.
RequestPtr makeComposite(const std::shared_ptr<CommState>& comm, bool tracked);
void addPart(const RequestPtr& composite, const RequestPtr& part);
void sealComposite(const RequestPtr& composite);

// Finishes r unless it already finished: copies staged results out (on success), records an
// asynchronous error for untracked failures, publishes done, and folds r into its composite.
// Never blocks and never talks to the daemon, so it may run under the connection's locks.
void finishRequest(const RequestPtr& r, const Status& status, const CompletionInfo& info = {},
                   FailureSeenBy seenBy = FailureSeenBy::Async);

}  // namespace hc::client
