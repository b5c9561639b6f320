// CommState: one communicator handle of this process: its rank, the daemon's handle, pre-
// multiplied-sum operators, errors, and the count of operations not yet completed.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "client/src/connection.h"
#include "hetero_comm/hc.h"

namespace hc::client {

struct CommState {
  Connection* conn = nullptr;
  uint64_t handle = 0;
  int rank = 0;
  int nranks = 0;
  std::atomic<bool> aborted{false};
  std::atomic<int> outstanding{0};
  RequestPtr initRequest;  // set while a non-blocking init is in progress

  std::mutex mutex;  // guards the fields below
  Status asyncError;
  std::string lastError;
  std::map<int, std::pair<uint8_t, uint64_t>> premulOps;  // id -> (dtype, scalar bits)
  int nextOp = 5;                                          // HC_NUM_OPS

  void setAsyncError(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex);
    if (asyncError.isOk()) asyncError = s;
  }
};

// Records s as the calling thread's (and comm's) last error and returns its hc_status_t.
hc_status_t fail(const Status& s, CommState* comm = nullptr);
// Fills an entry's buffer references and operator, then submits it on comm.
hc_status_t submitOp(hc_comm_t comm, ipc::SubmitEntry e, const void* send, uint64_t sendBytes,
                     const void* recv, uint64_t recvBytes, int op, hc_request_t* req);

}  // namespace hc::client

struct hc_comm {
  std::shared_ptr<hc::client::CommState> state;
};
struct hc_request {
  hc::client::RequestPtr r;
};
