// Stream-ordered device operations (DESIGN.md, "One allreduce, end to end", step 3). The call
// returns at once; the caller's stream
//   1. runs a host function that submits the entry once the stream's earlier work (the kernels
//      that produced the send data) has completed,
//   2. waits on the entry's done flag in host-mapped segment memory (cuStreamWaitValue32 GEQ),
//      which the daemon sets when the operation completed, or the client sets on abort, error or a
//      dead daemon (finishRequest), so the stream never waits forever,
//   3. runs a host function that takes the completion and returns the flag; a failure becomes
//      the communicator's asynchronous error (hc_comm_get_async_error) unless a request was
//      asked for.
// Operations of a group are submitted at hc_group_end, by the CPU: it first waits for their
// streams, then submits the group, then puts steps 2 and 3 on each stream.
#pragma once

#include <vector>

#include "client/src/submission.h"
#include "common/status.h"

namespace hc::client {

// Puts sub (sub.runtime and sub.stream set) on its stream. On failure the request is finished
// with the error, which is returned.
Status submitOnStream(Submission sub);

// For the group path (submitNow): waits for the streams of subs that have one and gives each a
// done flag. Call before the entries are submitted.
Status prepareGroupStreams(std::vector<Submission>& subs);
// After the entries were submitted: steps 2 and 3 on each sub's stream.
void orderGroupStreams(std::vector<Submission>& subs);

}  // namespace hc::client
