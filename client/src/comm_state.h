// CommState: one communicator handle of this process: its rank, the daemon's handle, pre-
// multiplied-sum operators, errors, and the count of operations not yet completed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "client/src/connection.h"
#include "client/src/device_runtime.h"
#include "hetero_comm/hc.h"

namespace hc::client {

struct Submission;
class SmallOpArea;

// A reduction operator made by hc_redop_create_premul_sum.
struct PremulOp {
  uint8_t dtype = 0;
  uint64_t scalar = 0;    // the scalar's bytes, or its segment offset when inBuffer
  bool inBuffer = false;  // HC_SCALAR_DEVICE: the daemon reads the scalar when the op runs
  // HC_SCALAR_DEVICE in a GPU runtime's memory: each operation copies it, in stream order, into
  // its done-flag slot in the segment (stream_ops.cc), where the daemon reads it.
  const void* deviceScalar = nullptr;
  DeviceRuntime* scalarRuntime = nullptr;
};

struct CommState {
  Connection* conn = nullptr;  // borrowed: connections are never freed
  std::atomic<bool> aborted{false};
  std::atomic<bool> revoked{false};  // hc_comm_revoke: a parent for shrink, never finalized
  std::atomic<int> outstanding{0};  // requests made on this communicator and not yet finished
  // Of those, the ones in the daemon, on a communicator with a small-operation area: small ops
  // wait for them (small_ops.h).
  std::atomic<int> daemonOps{0};
  // hc_config_t host_small_ops: this rank asked for the small-operation area at creation.
  std::atomic<bool> smallOpsAsked{false};
  // Set by init and split; a non-blocking one fixes them when initRequest completes (adoptInit).
  std::atomic<uint64_t> handle{0};
  std::atomic<int> rank{0};
  std::atomic<int> nranks{0};
  // Set by hc_comm_order_on_streams: the runtime whose streams order every operation on this
  // communicator (NCCL's rule). Null: hc's rule, only device buffers on a stream of their runtime.
  std::atomic<DeviceRuntime*> streamRuntime{nullptr};
  // The device this rank's buffers live on as its creator named it (hc_comm_init_all's devlist;
  // a split inherits it), for hc_comm_device; -1 when none was named. Buffers are still found by
  // address: nothing else reads it.
  std::atomic<int> device{-1};

  // Set by adoptInit before the communicator is usable, never changed after.
  std::shared_ptr<SmallOpArea> area;

  std::mutex mutex;        // guards the fields below
  RequestPtr initRequest;  // set while a non-blocking init or split is in progress
  Status asyncError;
  std::string lastError;
  std::map<int, PremulOp> premulOps;  // by hc_redop_t id
  int nextOp = HC_NUM_OPS;

  void setAsyncError(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex);
    if (asyncError.isOk()) asyncError = s;
  }
};

// Records s as the calling thread's (and comm's) last error and returns its hc_status_t.
hc_status_t fail(const Status& s, CommState* comm = nullptr);

// Takes over a finished non-blocking init or split: its handle, and for a split the rank and
// size in the new communicator. InProgress while it runs; its error if it failed. Locks mutex.
Status adoptInit(CommState* c);

// comm's state, checked to be usable from this process: not NULL, not inherited across fork,
// not aborted, initialized.
Result<std::shared_ptr<CommState>> usableComm(hc_comm_t comm);
// The same checks on a state, for operations recorded earlier (a group).
Status checkUsable(CommState* c);

// Waits for r (a request of comm) and returns its status, recording a failure as comm's last
// error.
hc_status_t waitRequest(const RequestPtr& r, CommState* comm);

// Sets sub's reduction operator: a built-in one, or a pre-multiplied sum of comm (with its scalar
// in device memory, when it is there).
Status applyRedop(CommState& comm, int op, Submission* sub);
// InvalidArgument when sub's scalar is in GPU memory and sub is not ordered on a stream of that
// runtime (its scalar could not be read in stream order). Call once the stream is chosen.
Status checkDeviceScalar(const Submission& sub);

// How a handle's life ended (comm_handles.h).
enum class HandleEnd : uint8_t { Live, Destroyed, Aborted };

// A handle's bookkeeping, guarded by the lock of comm_handles.cc.
struct HandleLife {
  int pins = 0;  // calls in flight on the handle (CommPin)
  HandleEnd end = HandleEnd::Live;
  bool expired = false;  // left the kept ended handles while pinned: the last unpin frees it
};

}  // namespace hc::client

// Made and freed by comm_handles.cc only: calls may still hold it after destroy or abort.
struct hc_comm {
  std::shared_ptr<hc::client::CommState> state;  // set when made, never changed
  hc::client::HandleLife life;
};
struct hc_request {
  hc::client::RequestPtr r;
};
