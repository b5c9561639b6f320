// Groups (hc_group_start / hc_group_end): per thread, nesting like NCCL's. While a group is
// open, operations are recorded, their requests already handed out as NCCL returns at once; the
// outermost hc_group_end submits them (submitNow). A call that fails inside a group fails the
// whole group: hc_group_end then submits nothing and returns that error, since the matching
// operations of the other ranks could never complete against a partial group.
#pragma once

#include "client/src/submission.h"

namespace hc::client {

// Whether the calling thread has a group open.
bool groupOpen();
// Records an operation in the calling thread's open group.
void recordInGroup(Submission sub);
// Remembers the first failure of a call inside the calling thread's open group.
void failGroup(const Status& s);
// Whether the calling thread's open group holds r (or a part of r) not yet submitted.
bool groupHolds(const Request* r);
// Whether the calling thread's open group holds an operation of comm.
bool groupTouches(const CommState* comm);

Status groupStart();
// Closes one level; the outermost submits the group.
Status groupEnd();

}  // namespace hc::client
