// What the calls that create communicators share (comm_api.cc: hc_get_unique_id and init;
// comm_init_all.cc: hc_comm_init_all).
#pragma once

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
                              int timeoutMs);

}  // namespace hc::client
