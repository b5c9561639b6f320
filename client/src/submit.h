// The path of every operation: build a Submission from the API call's arguments, then record it
// in the open group or submit it now; and the submission of a set of operations as units, one
// per communicator.
#pragma once

#include <memory>
#include <vector>

#include "client/src/comm_state.h"
#include "client/src/submission.h"
#include "hetero_comm/hc.h"

namespace hc::client {

// A buffer argument: bytes == 0 is "no buffer" whatever the pointer; kBytesOverflow (dtype.h)
// is a count too large to address.
struct BufferArg {
  const void* ptr = nullptr;
  uint64_t bytes = 0;
};

// Validates the call (communicator, dtype, root or peer, sizes), places the buffers, applies the
// reduction operator and posts the operation. Sets *req, when req is not NULL, only on success.
// Whether it is stream-ordered (stream_ops.h) is chooseStream's answer.
hc_status_t postOp(hc_comm_t comm, ipc::SubmitEntry e, BufferArg send, BufferArg recv, int redop,
                   hc_stream_t stream, hc_request_t* req);

// Whether a small op of a communicator with a small-operation area takes it: host buffers, no
// stream, the scalar of a pre-multiplied sum given by value. Otherwise it goes to the daemon,
// and the other ranks hand theirs over to it (small_ops.h).
bool takesSmallArea(const CommState& comm, const Submission& sub, BufferArg send, BufferArg recv,
                    hc_stream_t stream);

// Fails a call: records the error as the last error and, inside a group, as the group's error,
// so that hc_group_end submits none of the group's operations.
hc_status_t rejectOp(const Status& s, CommState* comm);

// Fills the buffer references of sub: segment memory by reference; device memory by its
// registered region; other host memory by address when the connection has cross-memory attach
// (the daemon stages it), else through a new staging (sub->staging), with references relative
// to the block until prepared. The request keeps the
// staging when results must be copied out.
// Sets *bufferRuntime to the runtime of the device buffers (null: none is device memory).
Status placeBuffers(Connection& conn, Submission* sub, BufferArg send, BufferArg recv,
                    DeviceRuntime** bufferRuntime);

// Decides whether sub is stream-ordered, and on which stream, by the communicator's rule: with
// NCCL's (hc_comm_order_on_streams) every operation on `stream` of the communicator's runtime, 0
// being its legacy default stream; else hc's, a device buffer's operation on a non-null stream
// of its runtime. Refuses a stream being captured into a graph.
Status chooseStream(const CommState& comm, DeviceRuntime* bufferRuntime, void* stream,
                    Submission* sub);

// A reference `relative` bytes into a staging block; rebased by prepareSubmission().
ipc::BufferRef stagedRef(uint64_t relative);
// An absent buffer.
ipc::BufferRef noBufferRef();
// This process's own memory at p, which the daemon reads and writes by cross-memory attach.
ipc::BufferRef processMemoryRef(const void* p);

// Submits operations now, as one unit per communicator: each communicator's entries in posting
// order, kEntryGroupMore on every entry but its last. Nothing is submitted unless every unit
// passes the checks (size, communicator usable, daemon version) and every staging is prepared.
// On failure every request completes with the error, which the caller returns.
Status submitNow(std::vector<Submission>& subs);

// Submits one entry outside any group (init, destroy, split) and returns its request.
Result<RequestPtr> submitControl(Connection& conn, const ipc::SubmitEntry& e,
                                 const std::shared_ptr<CommState>& comm, bool tracked = true);

}  // namespace hc::client
