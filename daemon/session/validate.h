// Turns a submission entry into a PendingOp, or says exactly what is wrong with it: unknown
// dtype or operator, counts whose byte size overflows, buffers outside the client's allocations,
// partially overlapping send and receive buffers, a root out of range.
#pragma once

#include "common/ipc/protocol.h"
#include "common/status.h"
#include "daemon/session/pending_op.h"
#include "daemon/session/session.h"

namespace hc::session {

Result<PendingOp> resolveOp(const ipc::SubmitEntry& entry, const std::shared_ptr<Session>& session,
                            int rank, int nranks);

// "allreduce(count=10, float32, sum)", for mismatch reports.
std::string describeOp(const PendingOp& op);
const char* opName(ipc::OpType type);

}  // namespace hc::session
