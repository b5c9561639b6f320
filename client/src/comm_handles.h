// The life of hc_comm_t handles. A handle is registered when it is made and ended by
// hc_comm_destroy or hc_comm_abort. A call that may race with those pins the handle first
// (CommPin): the handle, and with it its CommState, then stays allocated until the call returns,
// and abort neither frees it under the call nor waits for it.
//
// Pinning alone cannot cover a call that reaches the handle after the end returned: the shim's
// non-blocking ncclCommFinalize runs hc_comm_finalize on a thread that may first run after
// ncclCommAbort came back. So an ended handle is kept, state and all, while the next
// kKeptEndedHandles handles end: such a late call finds it ended and fails cleanly, instead of
// reading freed memory, or a newer communicator that got the same address. A call made later
// still gets InvalidArgument (no such handle) unless a new handle took the address by then.
#pragma once

#include <cstddef>
#include <memory>

#include "client/src/comm_state.h"
#include "common/status.h"

namespace hc::client {

// Enough for every end that a late call can overlap in practice (a thread's start), small enough
// to bound the memory kept (a few hundred bytes each).
constexpr size_t kKeptEndedHandles = 256;

// A new handle of state, registered; null when out of memory.
hc_comm* newCommHandle(std::shared_ptr<CommState> state);
// Unregisters and frees a handle that was never handed out (its creation failed).
void discardCommHandle(hc_comm* handle);

// Holds a handle for one call. Any thread; never blocks beyond a short lock.
class CommPin {
 public:
  // Pins comm when it is a handle of this process, live or recently ended.
  explicit CommPin(hc_comm_t comm);
  ~CommPin();
  CommPin(const CommPin&) = delete;
  CommPin& operator=(const CommPin&) = delete;

  // Ok when the handle was live when pinned. Otherwise what a call on it gets: InvalidArgument
  // for NULL, an unknown or a destroyed handle; Unavailable for an aborted one.
  const Status& status() const { return status_; }
  bool pinned() const { return handle_ != nullptr; }
  // The handle's state; only when pinned().
  CommState* state() const { return handle_->state.get(); }
  // How the handle ended when it was pinned (Live if it had not).
  HandleEnd endedAs() const { return endedAs_; }
  // Ends the handle (hc_comm_destroy, hc_comm_abort): later pins see it ended. False when it had
  // already ended; the first end stays. Only when pinned().
  bool end(HandleEnd how);

 private:
  hc_comm* handle_ = nullptr;
  HandleEnd endedAs_ = HandleEnd::Live;
  Status status_;
};

}  // namespace hc::client
