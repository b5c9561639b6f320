// What the calls that create communicators share (comm_api.cc: hc_get_unique_id, init, split;
// comm_init_all.cc: hc_comm_init_all; comm_shrink.cc: hc_comm_shrink).
#pragma once

#include "client/src/comm_handles.h"
#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/request.h"
#include "common/status.h"
#include "hetero_comm/hc.h"

namespace hc::client {

// A fresh unique id: a random communicator key and, when nameRoot, this daemon's Peer address as
// the job's root (a job that may span nodes); without, an id of a job on this daemon alone.
Result<hc_unique_id_t> newUniqueId(Connection& conn, bool nameRoot);

// Submits the CommInit of `rank` of an nranks communicator with id; the request completes when
// every rank has joined (its value is the daemon's handle) or the join failed. timeoutMs 0: the
// daemon's default deadline.
Result<RequestPtr> submitInit(Connection& conn, int nranks, const hc_unique_id_t& id, int rank,
                              int timeoutMs, bool smallOps = false);

// What hc_config_t says about a communicator being made.
struct CommConfig {
  bool blocking = true;
  int timeoutMs = 0;  // 0: the daemon's default
  bool hostSmallOps = false;  // hc_config_t host_small_ops (small_ops.h)
};
Result<CommConfig> readConfig(const hc_config_t* config);

// Fails a call whose handle could not be pinned live, recording the error on it when it exists.
hc_status_t failOn(const CommPin& pin);

// Finishes the creation of a communicator (init, split, shrink) whose request r is under way:
// returns at once when non-blocking, else waits and takes over the handle. `waitComm` is the
// communicator whose abort ends the wait (the parent of a split).
hc_status_t completeCreation(hc_comm_t handle, const RequestPtr& r, bool blocking,
                             CommState* waitComm, hc_comm_t* out);

// hc_comm_split of a communicator this rank revoked (comm_shrink.cc): NCCL lets a revoked
// communicator be split, but its operations no longer match, so every rank first makes a fresh
// copy of it (a shrink that excludes nobody, which needs no working parent), splits the copy,
// and drops it. Blocks whatever config says.
hc_status_t splitRevoked(hc_comm_t comm, int color, int key, hc_comm_t* newcomm,
                         const hc_config_t* config);

}  // namespace hc::client
