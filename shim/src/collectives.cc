// Collectives, ncclBcast and the all-to-all spellings of NCCL and RCCL, each one hc_* call.
#include "shim/src/shim.h"

using hc::shim::asHc;
using hc::shim::issue;
using hc::shim::toHcDtype;

namespace {

using Req = hc_request_t*;

// Checks the dtype, then issues the call f(hcDtype, req) on comm and stream.
template <class F>
ncclResult_t typed(ncclDataType_t datatype, ncclComm_t comm, hcNcclStream_t stream, F&& f) {
  if (comm == nullptr) return hc::shim::fail(ncclInvalidArgument, "comm is NULL");
  hc_dtype_t dt;
  const ncclResult_t r = toHcDtype(datatype, &dt);
  if (r != ncclSuccess) return r;
  return issue(comm, stream, [&](Req req) { return f(dt, req); });
}

hc_redop_t op(ncclRedOp_t o) { return static_cast<hc_redop_t>(static_cast<int>(o)); }

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t o, ncclComm_t comm,
                           cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_allreduce(sendbuff, recvbuff, count, dt, op(o), asHc(comm), stream, req);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t o, int root, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_reduce(sendbuff, recvbuff, count, dt, op(o), root, asHc(comm), stream, req);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_broadcast(sendbuff, recvbuff, count, dt, root, asHc(comm), stream, req);
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t o, ncclComm_t comm,
                               cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_reduce_scatter(sendbuff, recvbuff, recvcount, dt, op(o), asHc(comm), stream, req);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_allgather(sendbuff, recvbuff, sendcount, dt, asHc(comm), stream, req);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_alltoall(sendbuff, recvbuff, count, dt, asHc(comm), stream, req);
  });
}

ncclResult_t ncclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_alltoallv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, dt,
                        asHc(comm), stream, req);
  });
}

ncclResult_t ncclAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return ncclAllToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm,
                       stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_gather(sendbuff, recvbuff, count, dt, root, asHc(comm), stream, req);
  });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_scatter(sendbuff, recvbuff, count, dt, root, asHc(comm), stream, req);
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_send(sendbuff, count, dt, peer, asHc(comm), stream, req);
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return typed(datatype, comm, stream, [&](hc_dtype_t dt, Req req) {
    return hc_recv(recvbuff, count, dt, peer, asHc(comm), stream, req);
  });
}

}  // extern "C"

HC_NCCL_TWIN(ncclAllReduce)
HC_NCCL_TWIN(ncclReduce)
HC_NCCL_TWIN(ncclBroadcast)
HC_NCCL_TWIN(ncclBcast)
HC_NCCL_TWIN(ncclReduceScatter)
HC_NCCL_TWIN(ncclAllGather)
HC_NCCL_TWIN(ncclAlltoAll)
HC_NCCL_TWIN(ncclAllToAll)
HC_NCCL_TWIN(ncclAllToAllv)
HC_NCCL_TWIN(ncclAlltoAllv)
HC_NCCL_TWIN(ncclGather)
HC_NCCL_TWIN(ncclScatter)
HC_NCCL_TWIN(ncclSend)
HC_NCCL_TWIN(ncclRecv)
