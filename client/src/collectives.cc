// The collective entry points of hetero_comm/hc.h: each fills one submission entry and names the
// buffers the calling rank passes, with their sizes for the client-side checks (the daemon
// validates again).
#include "client/src/comm_state.h"
#include "client/src/dtype.h"
#include "client/src/submit.h"
#include "hetero_comm/hc.h"

namespace {

using hc::client::BufferArg;
using hc::client::bytesOf;
using hc::client::postOp;
using hc::ipc::OpType;

hc::ipc::SubmitEntry entry(OpType type, size_t count, hc_dtype_t dtype, int root) {
  hc::ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(type);
  e.dtype = static_cast<uint8_t>(dtype);
  e.count = count;
  e.root = root;
  return e;
}

int nranksOf(hc_comm_t comm) {
  return comm != nullptr && comm->state ? comm->state->nranks.load() : 0;
}
bool isRoot(hc_comm_t comm, int root) {
  return comm != nullptr && comm->state && comm->state->rank.load() == root;
}

}  // namespace

extern "C" {

hc_status_t hc_allreduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         hc_redop_t op, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  return postOp(comm, entry(OpType::AllReduce, count, dtype, -1), {sendbuff, b}, {recvbuff, b}, op, stream, req);
}

hc_status_t hc_broadcast(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                         int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  BufferArg send = isRoot(comm, root) ? BufferArg{sendbuff, b} : BufferArg{};
  return postOp(comm, entry(OpType::Broadcast, count, dtype, root), send, {recvbuff, b}, HC_SUM, stream, req);
}

hc_status_t hc_reduce(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                      hc_redop_t op, int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype);
  BufferArg recv = isRoot(comm, root) ? BufferArg{recvbuff, b} : BufferArg{};
  return postOp(comm, entry(OpType::Reduce, count, dtype, root), {sendbuff, b}, recv, op, stream, req);
}

hc_status_t hc_allgather(const void* sendbuff, void* recvbuff, size_t sendcount, hc_dtype_t dtype,
                         hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  return postOp(comm, entry(OpType::AllGather, sendcount, dtype, -1),
                {sendbuff, bytesOf(sendcount, dtype)},
                {recvbuff, bytesOf(sendcount, dtype, nranksOf(comm))}, HC_SUM, stream, req);
}

hc_status_t hc_reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                              hc_dtype_t dtype, hc_redop_t op, hc_comm_t comm, hc_stream_t stream,
                              hc_request_t* req) {
  return postOp(comm, entry(OpType::ReduceScatter, recvcount, dtype, -1),
                {sendbuff, bytesOf(recvcount, dtype, nranksOf(comm))},
                {recvbuff, bytesOf(recvcount, dtype)}, op, stream, req);
}

hc_status_t hc_alltoall(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                        hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  uint64_t b = bytesOf(count, dtype, nranksOf(comm));
  return postOp(comm, entry(OpType::AllToAll, count, dtype, -1), {sendbuff, b}, {recvbuff, b},
                HC_SUM, stream, req);
}

hc_status_t hc_gather(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                      int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  // Only the root receives: nranks * count, rank r's part at r * count.
  BufferArg recv =
      isRoot(comm, root) ? BufferArg{recvbuff, bytesOf(count, dtype, nranksOf(comm))} : BufferArg{};
  return postOp(comm, entry(OpType::Gather, count, dtype, root), {sendbuff, bytesOf(count, dtype)},
                recv, HC_SUM, stream, req);
}

hc_status_t hc_scatter(const void* sendbuff, void* recvbuff, size_t count, hc_dtype_t dtype,
                       int root, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  // Only the root sends: nranks * count, rank r's part at r * count.
  BufferArg send =
      isRoot(comm, root) ? BufferArg{sendbuff, bytesOf(count, dtype, nranksOf(comm))} : BufferArg{};
  return postOp(comm, entry(OpType::Scatter, count, dtype, root), send,
                {recvbuff, bytesOf(count, dtype)}, HC_SUM, stream, req);
}

hc_status_t hc_barrier(hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  return postOp(comm, entry(OpType::Barrier, 0, HC_INT8, -1), {}, {}, HC_SUM, stream, req);
}

}  // extern "C"
