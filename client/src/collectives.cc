// The operation entry points of hetero_comm/hc.h: each fills one submission entry.
#include <cstring>
#include <string>

#include "client/src/comm_state.h"
#include "hetero_comm/hc.h"


namespace {

using hc::ipc::OpType;

// Element size of the dtypes the wire knows; 0 for values outside the enum.
size_t elemSize(hc_dtype_t d) {
  switch (d) {
    case HC_INT8: case HC_UINT8: case HC_FLOAT8E4M3: case HC_FLOAT8E5M2: return 1;
    case HC_FLOAT16: case HC_BFLOAT16: return 2;
    case HC_INT32: case HC_UINT32: case HC_FLOAT32: return 4;
    case HC_INT64: case HC_UINT64: case HC_FLOAT64: return 8;
    default: return 0;
  }
}

hc::ipc::SubmitEntry entry(OpType type, size_t count, hc_dtype_t dtype, int root) {
  hc::ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(type);
  e.dtype = static_cast<uint8_t>(dtype);
  e.count = count;
  e.root = root;
  return e;
}

int nranksOf(hc_comm_t comm) { return comm != nullptr && comm->state ? comm->state->nranks : 0; }
int rankOf(hc_comm_t comm) { return comm != nullptr && comm->state ? comm->state->rank : 0; }

// Byte sizes for the client-side pointer check; the daemon validates again.
uint64_t bytesOf(size_t count, hc_dtype_t dtype, uint64_t times = 1) {
  uint64_t b = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), elemSize(dtype), &b)) return ~0ull;
  if (__builtin_mul_overflow(b, times, &b)) return ~0ull;
  return b;
}

hc_status_t notYet(const char* what) {
  // Declared for the full NCCL surface; these arrive with point-to-point and device support.
  return hc::client::fail(
      hc::invalidArgument(std::string(what) + " is not available in this release of hetero-comm"));
}

}  // namespace

using hc::client::submitOp;

extern "C" {

hc_status_t hc_allreduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         hc_redop_t op, hc_comm_t comm, hc_stream_t, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  return submitOp(comm, entry(OpType::AllReduce, count, dtype, -1), sendbuff, b, recvbuff, b, op,
                  req);
}

hc_status_t hc_broadcast(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         int root, hc_comm_t comm, hc_stream_t, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  bool isRoot = rankOf(comm) == root;
  return submitOp(comm, entry(OpType::Broadcast, count, dtype, root), isRoot ? sendbuff : nullptr,
                  isRoot ? b : 0, recvbuff, b, HC_SUM, req);
}

hc_status_t hc_reduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                      hc_redop_t op, int root, hc_comm_t comm, hc_stream_t, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  bool isRoot = rankOf(comm) == root;
  return submitOp(comm, entry(OpType::Reduce, count, dtype, root), sendbuff, b,
                  isRoot ? recvbuff : nullptr, isRoot ? b : 0, op, req);
}

hc_status_t hc_allgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                         hc_dtype_t dtype, hc_comm_t comm, hc_stream_t, hc_request_t* req) {
  return submitOp(comm, entry(OpType::AllGather, sendcount, dtype, -1), sendbuff,
                  bytesOf(sendcount, dtype), recvbuff, bytesOf(sendcount, dtype, nranksOf(comm)),
                  HC_SUM, req);
}

hc_status_t hc_reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                              hc_dtype_t dtype, hc_redop_t op, hc_comm_t comm, hc_stream_t,
                              hc_request_t* req) {
  return submitOp(comm, entry(OpType::ReduceScatter, recvcount, dtype, -1), sendbuff,
                  bytesOf(recvcount, dtype, nranksOf(comm)), recvbuff, bytesOf(recvcount, dtype),
                  op, req);
}

hc_status_t hc_barrier(hc_comm_t comm, hc_stream_t, hc_request_t* req) {
  return submitOp(comm, entry(OpType::Barrier, 0, HC_INT8, -1), nullptr, 0, nullptr, 0, HC_SUM,
                  req);
}

hc_status_t hc_redop_create_premul_sum(hc_redop_t* op, void* scalar, hc_dtype_t dtype,
                                       hc_scalar_residence_t residence, hc_comm_t comm) {
  if (op == nullptr || scalar == nullptr || comm == nullptr) return HC_INVALID_ARGUMENT;
  size_t size = elemSize(dtype);
  if (size == 0) return HC_INVALID_ARGUMENT;
  if (residence != HC_SCALAR_HOST_IMMEDIATE && residence != HC_SCALAR_DEVICE) {
    return HC_INVALID_ARGUMENT;
  }
  // Host ranks have no device: a "device" scalar is host memory read now, like an immediate.
  uint64_t bits = 0;
  std::memcpy(&bits, scalar, size);
  auto& st = *comm->state;
  std::lock_guard<std::mutex> lock(st.mutex);
  int id = st.nextOp++;
  st.premulOps[id] = {static_cast<uint8_t>(dtype), bits};
  *op = static_cast<hc_redop_t>(id);
  return HC_OK;
}

hc_status_t hc_redop_destroy(hc_redop_t op, hc_comm_t comm) {
  if (comm == nullptr) return HC_INVALID_ARGUMENT;
  auto& st = *comm->state;
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.premulOps.erase(static_cast<int>(op)) == 1 ? HC_OK : HC_INVALID_ARGUMENT;
}

// Groups: every operation is matched by its per-communicator sequence number and runs in the
// daemon, so a group of collectives needs no aggregation to avoid deadlock.
static thread_local int tlsGroupDepth = 0;
hc_status_t hc_group_start(void) {
  ++tlsGroupDepth;
  return HC_OK;
}
hc_status_t hc_group_end(void) {
  if (tlsGroupDepth == 0) return HC_INVALID_ARGUMENT;
  --tlsGroupDepth;
  return HC_OK;
}

hc_status_t hc_comm_init_all(hc_comm_t*, int, const int*) { return notYet("hc_comm_init_all"); }
hc_status_t hc_comm_split(hc_comm_t, int, int, hc_comm_t*, hc_config_t*) {
  return notYet("hc_comm_split");
}
hc_status_t hc_comm_register(hc_comm_t, void*, size_t, void**) {
  return notYet("hc_comm_register");
}
hc_status_t hc_comm_deregister(hc_comm_t, void*) { return notYet("hc_comm_deregister"); }
hc_status_t hc_alltoall(const void*, void*, size_t, hc_dtype_t, hc_comm_t, hc_stream_t,
                        hc_request_t*) {
  return notYet("hc_alltoall");
}
hc_status_t hc_alltoallv(const void*, const size_t*, const size_t*, void*, const size_t*,
                         const size_t*, hc_dtype_t, hc_comm_t, hc_stream_t, hc_request_t*) {
  return notYet("hc_alltoallv");
}
hc_status_t hc_gather(const void*, void*, size_t, hc_dtype_t, int, hc_comm_t, hc_stream_t,
                      hc_request_t*) {
  return notYet("hc_gather");
}
hc_status_t hc_scatter(const void*, void*, size_t, hc_dtype_t, int, hc_comm_t, hc_stream_t,
                       hc_request_t*) {
  return notYet("hc_scatter");
}
hc_status_t hc_send(const void*, size_t, hc_dtype_t, int, hc_comm_t, hc_stream_t, hc_request_t*) {
  return notYet("hc_send");
}
hc_status_t hc_recv(void*, size_t, hc_dtype_t, int, hc_comm_t, hc_stream_t, hc_request_t*) {
  return notYet("hc_recv");
}

}  // extern "C"
