// Turns a submission entry into a PendingOp, or says exactly what is wrong with it: unknown
// dtype or operator (checked here, the daemon's trust boundary, against common/vocabulary.h),
// counts whose byte size overflows, buffers outside the client's allocations, partially overlapping
// send and receive buffers, a root out of range.
#pragma once

#include "common/ipc/protocol.h"
#include "common/status.h"
#include "daemon/session/pending_op.h"
#include "daemon/session/session.h"

namespace hc::session {

Result<PendingOp> resolveOp(const ipc::SubmitEntry& entry, const std::shared_ptr<Session>& session,
                            int rank, int nranks);

// A CommShrink's exclude list (protocol.h): `count` int32 ranks in a segment buffer, each in
// [0, nranks) and named once, returned ascending. `self` (the caller's rank) may not be in it.
Result<std::vector<int>> readExcludeList(const ipc::SubmitEntry& entry, const Session& session,
                                         int nranks, int self);

// "allreduce(count=10, float32, sum)", for mismatch reports.
std::string describeOp(const PendingOp& op);
// "<what> mismatch, int32 vs float32: rank 0 posted allreduce(count=10, int32, sum), rank 1
// posted allreduce(count=10, float32, sum)": the first field in which the two descriptions
// (describeOp's) differ comes first, so that it survives a completion's short text.
std::string mismatchText(const std::string& what, int rankA, const std::string& a,
                         const std::string& aVerb, int rankB, const std::string& b,
                         const std::string& bVerb);

}  // namespace hc::session
