#include "client/src/group.h"

#include <vector>

#include "client/src/comm_state.h"
#include "client/src/submit.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

struct OpenGroup {
  int depth = 0;
  std::vector<Submission> ops;  // in posting order
  Status firstError;
};

// A forked child inherits the forking thread's group; its communicators refuse to work there,
// so hc_group_end in the child fails the group cleanly.
thread_local OpenGroup tlsGroup;

}  // namespace

bool groupOpen() { return tlsGroup.depth > 0; }

void recordInGroup(Submission sub) { tlsGroup.ops.push_back(std::move(sub)); }

void failGroup(const Status& s) {
  if (groupOpen() && tlsGroup.firstError.isOk()) tlsGroup.firstError = s;
}

bool groupHolds(const Request* r) {
  for (const Submission& op : tlsGroup.ops) {
    if (op.request.get() == r || op.request->parent.get() == r) return true;
  }
  return false;
}

bool groupTouches(const CommState* comm) {
  for (const Submission& op : tlsGroup.ops) {
    if (op.comm.get() == comm) return true;
  }
  return false;
}

Status groupStart() {
  ++tlsGroup.depth;
  return okStatus();
}

Status groupEnd() {
  if (tlsGroup.depth == 0) return invalidArgument("hc_group_end without a matching hc_group_start");
  if (--tlsGroup.depth > 0) return okStatus();
  std::vector<Submission> ops = std::move(tlsGroup.ops);
  tlsGroup.ops.clear();
  Status error = std::move(tlsGroup.firstError);
  tlsGroup.firstError = okStatus();
  if (!error.isOk()) {
    error = Status{error.code(), "the group was not submitted because one of its calls failed: " +
                                     error.message()};
    for (Submission& op : ops) finishRequest(op.request, error, {}, FailureSeenBy::Caller);
    return error;
  }
  return submitNow(ops);
}

}  // namespace hc::client

using hc::client::fail;

extern "C" {

hc_status_t hc_group_start(void) {
  (void)hc::client::groupStart();
  return HC_OK;
}

hc_status_t hc_group_end(void) {
  hc::Status s = hc::client::groupEnd();
  return s.isOk() ? HC_OK : fail(s);
}

}  // extern "C"
