// Reduction operators: the built-in ones, and pre-multiplied sums (hc_redop_create_premul_sum)
// whose scalar travels in the entry (HC_SCALAR_HOST_IMMEDIATE) or stays in segment memory that
// the daemon reads when the operation runs (HC_SCALAR_DEVICE), or in CUDA or HIP device memory,
// which each operation copies in stream order into segment memory (stream_ops.cc).
#include <cstdio>
#include <cstring>
#include <string>

#include "client/src/comm_state.h"
#include "client/src/dtype.h"
#include "client/src/submission.h"
#include "hetero_comm/hc.h"

namespace hc::client {

Status applyRedop(CommState& comm, int op, Submission* sub) {
  ipc::SubmitEntry* e = &sub->entry;
  if (op >= 0 && op < HC_NUM_OPS) {
    e->redop = static_cast<uint8_t>(op);
    return okStatus();
  }
  std::lock_guard<std::mutex> lock(comm.mutex);
  auto it = comm.premulOps.find(op);
  if (it == comm.premulOps.end()) {
    return invalidArgument("unknown reduction operator " + std::to_string(op) +
                           " (destroyed, or made on another communicator)");
  }
  const PremulOp& premul = it->second;
  if (premul.dtype != e->dtype) {
    return invalidArgument("reduction operator " + std::to_string(op) + " was made for dtype " +
                           std::to_string(premul.dtype) + ", the operation uses dtype " +
                           std::to_string(e->dtype));
  }
  e->redop = static_cast<uint8_t>(ipc::RedOp::PreMulSum);
  e->scalar = premul.scalar;
  if (premul.inBuffer) e->flags |= ipc::kEntryScalarInBuffer;
  sub->deviceScalar = premul.deviceScalar;
  sub->scalarRuntime = premul.scalarRuntime;
  sub->scalarBytes = elemSize(premul.dtype);
  return okStatus();
}

Status checkDeviceScalar(const Submission& sub) {
  if (sub.deviceScalar == nullptr) return okStatus();
  if (sub.onStream() && sub.runtime == sub.scalarRuntime) return okStatus();
  return invalidArgument(std::string("the pre-multiplied sum's scalar is ") +
                         sub.scalarRuntime->name() +
                         " device memory, read in stream order: the operation must be ordered on "
                         "a stream of that runtime");
}

}  // namespace hc::client

using hc::client::CommState;
using hc::client::fail;

namespace {

// The GPU runtime (CUDA or HIP, not the simulated device) whose device memory holds ptr; null
// when none does.
hc::client::DeviceRuntime* gpuRuntimeOf(const void* ptr, hc::client::DevicePointer* out) {
  for (hc::client::DeviceRuntime* rt : hc::client::deviceRuntimes()) {
    if (rt != hc::client::simRuntime() && rt->lookup(ptr, out)) return rt;
  }
  return nullptr;
}

}  // namespace

extern "C" {

hc_status_t hc_redop_create_premul_sum(hc_redop_t* op, void* scalar, hc_dtype_t dtype,
                                       hc_scalar_residence_t residence, hc_comm_t comm) {
  if (op == nullptr || scalar == nullptr) return fail(hc::invalidArgument("op or scalar is NULL"));
  if (comm == nullptr || !comm->state) return fail(hc::invalidArgument("communicator is NULL"));
  CommState& st = *comm->state;
  const size_t size = hc::client::elemSize(dtype);
  if (size == 0) {
    return fail(hc::invalidArgument("dtype " + std::to_string(dtype) + " is not an hc_dtype_t"),
                &st);
  }
  hc::client::PremulOp premul;
  premul.dtype = static_cast<uint8_t>(dtype);
  if (residence == HC_SCALAR_HOST_IMMEDIATE) {
    std::memcpy(&premul.scalar, scalar, size);  // the value now; little-endian, zero-padded
  } else if (residence == HC_SCALAR_DEVICE) {
    // Host ranks have no device memory; the segment plays its part: the daemon reads the scalar
    // when each operation runs, so the caller may change it between operations, as with NCCL.
    auto in = st.conn->inSegment(scalar, size);
    hc::client::DevicePointer device;
    hc::client::DeviceRuntime* gpu = in.isOk() && !*in ? gpuRuntimeOf(scalar, &device) : nullptr;
    if (gpu != nullptr) {
      // Read by each operation when its stream reaches it (stream_ops.cc), as NCCL reads it.
      premul.deviceScalar = scalar;
      premul.scalarRuntime = gpu;
      premul.inBuffer = true;
    } else if (!in.isOk() || !*in) {
      char text[240];
      std::snprintf(text, sizeof(text),
                    "HC_SCALAR_DEVICE scalar %p is neither in memory from hc_mem_alloc nor in "
                    "CUDA or HIP device memory of this process; use HC_SCALAR_HOST_IMMEDIATE to "
                    "pass a value",
                    scalar);
      return fail(hc::invalidArgument(text), &st);
    } else {
      auto ref = st.conn->bufferRef(scalar, size);
      if (!ref.isOk()) return fail(ref.status(), &st);
      premul.scalar = ref->offset;
      premul.inBuffer = true;
    }
  } else {
    return fail(hc::invalidArgument("scalar residence " + std::to_string(residence) +
                                    " is neither HC_SCALAR_DEVICE nor HC_SCALAR_HOST_IMMEDIATE"),
                &st);
  }
  std::lock_guard<std::mutex> lock(st.mutex);
  int id = st.nextOp++;
  st.premulOps[id] = premul;
  *op = static_cast<hc_redop_t>(id);
  return HC_OK;
}

hc_status_t hc_redop_destroy(hc_redop_t op, hc_comm_t comm) {
  if (comm == nullptr || !comm->state) return fail(hc::invalidArgument("communicator is NULL"));
  CommState& st = *comm->state;
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.premulOps.erase(static_cast<int>(op)) == 1) return HC_OK;
  std::string text = "reduction operator " + std::to_string(op) +
                     " is not a live pre-multiplied "
                     "sum of this communicator";
  st.lastError = text;  // fail() would take st.mutex again
  return fail(hc::invalidArgument(text));
}

}  // extern "C"
