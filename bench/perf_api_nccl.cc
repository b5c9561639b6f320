#include "bench/perf_api_nccl.h"

#include <dlfcn.h>

#include <cstring>

namespace hc::bench {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(hc_unique_id_t),
              "the parent hands the ranks NCCL's id in hc-perf's 128-byte slot");

// By name, not by value: hc-perf's cases speak hc's types, the calls NCCL's.
ncclDataType_t ncclType(hc_dtype_t dtype) {
  switch (dtype) {
    case HC_INT8:
      return ncclInt8;
    case HC_UINT8:
      return ncclUint8;
    case HC_INT32:
      return ncclInt32;
    case HC_UINT32:
      return ncclUint32;
    case HC_INT64:
      return ncclInt64;
    case HC_UINT64:
      return ncclUint64;
    case HC_FLOAT16:
      return ncclFloat16;
    case HC_FLOAT32:
      return ncclFloat32;
    case HC_FLOAT64:
      return ncclFloat64;
    case HC_BFLOAT16:
      return ncclBfloat16;
    case HC_FLOAT8E4M3:
      return ncclFloat8e4m3;
    case HC_FLOAT8E5M2:
      return ncclFloat8e5m2;
    default:
      return ncclNumTypes;  // refused by the library, with its message
  }
}

ncclRedOp_t ncclOp(hc_redop_t redop) {
  switch (redop) {
    case HC_SUM:
      return ncclSum;
    case HC_PROD:
      return ncclProd;
    case HC_MAX:
      return ncclMax;
    case HC_MIN:
      return ncclMin;
    case HC_AVG:
      return ncclAvg;
    default:
      return ncclSum;  // collectives without a reduction ignore it
  }
}

std::string failureText(ncclResult_t r, const char* call, ncclComm_t comm) {
  const char* detail = ncclGetLastError(comm);
  if (detail == nullptr || *detail == '\0') detail = "(no detail)";
  return std::string(call) + " failed: " + ncclGetErrorString(r) + ": " + detail;
}

}  // namespace

bool ncclUniqueIdInto(hc_unique_id_t* out, std::string* error) {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    *error = failureText(r, "ncclGetUniqueId", nullptr);
    return false;
  }
  std::memcpy(out->internal, id.internal, sizeof(id.internal));
  return true;
}

std::string ncclLibraryText() {
  Dl_info where{};
  const bool found =
      ::dladdr(reinterpret_cast<void*>(&ncclGetVersion), &where) != 0 && where.dli_fname != nullptr;
  int version = 0;
  std::string text = found ? where.dli_fname : "libnccl.so.2 (path unknown)";
  if (ncclGetVersion(&version) == ncclSuccess)
    text += ", ncclGetVersion " + std::to_string(version);
  return text;
}

NcclRank::~NcclRank() {
  // After a failure the process exits next; nobody is left to hear of this one's outcome.
  if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
}

bool NcclRank::check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return true;
  error_ = failureText(r, call, comm_);
  return false;
}

bool NcclRank::init(int nranks, const hc_unique_id_t& id, int rank) {
  ncclUniqueId nid;
  std::memcpy(nid.internal, id.internal, sizeof(nid.internal));
  rank_ = rank;
  nranks_ = nranks;
  return check(ncclCommInitRank(&comm_, nranks, nid, rank), "ncclCommInitRank");
}

bool NcclRank::issue(const Case& c, const void* send, void* recv, hc_stream_t stream) {
  // The shim passes a stream through to hc as it is; NULL is NCCL's NULL stream.
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  const ncclDataType_t t = ncclType(c.dtype);
  switch (c.op) {
    case OpKind::AllReduce:
      return check(ncclAllReduce(send, recv, c.count, t, ncclOp(c.redop), comm_, s),
                   "ncclAllReduce");
    case OpKind::Broadcast:
      return check(ncclBroadcast(send, recv, c.count, t, c.root, comm_, s), "ncclBroadcast");
    case OpKind::Reduce:
      return check(ncclReduce(send, recv, c.count, t, ncclOp(c.redop), c.root, comm_, s),
                   "ncclReduce");
    case OpKind::AllGather:
      return check(ncclAllGather(send, recv, c.sendCount, t, comm_, s), "ncclAllGather");
    case OpKind::ReduceScatter:
      return check(ncclReduceScatter(send, recv, c.recvCount, t, ncclOp(c.redop), comm_, s),
                   "ncclReduceScatter");
    case OpKind::AllToAll:
      return check(ncclAlltoAll(send, recv, c.count, t, comm_, s), "ncclAlltoAll");
    case OpKind::Gather:
      return check(ncclGather(send, recv, c.count, t, c.root, comm_, s), "ncclGather");
    case OpKind::Scatter:
      return check(ncclScatter(send, recv, c.count, t, c.root, comm_, s), "ncclScatter");
    case OpKind::SendRecv: {
      if (!check(ncclGroupStart(), "ncclGroupStart")) return false;
      bool ok =
          check(ncclSend(send, c.count, t, (rank_ + 1) % nranks_, comm_, s), "ncclSend") &&
          check(ncclRecv(recv, c.count, t, (rank_ + nranks_ - 1) % nranks_, comm_, s), "ncclRecv");
      // Always closed, so a failed call leaves no group open; the first failure is the one told.
      const ncclResult_t end = ncclGroupEnd();
      return ok && check(end, "ncclGroupEnd");
    }
    case OpKind::Barrier:  // NCCL has none; parseOptions leaves it out
      break;
  }
  error_ = std::string(opName(c.op)) + " has no NCCL call";
  return false;
}

bool NcclRank::finish() {
  if (!check(ncclCommFinalize(comm_), "ncclCommFinalize")) return false;
  const ncclResult_t r = ncclCommDestroy(comm_);
  comm_ = nullptr;  // gone whatever the outcome
  return check(r, "ncclCommDestroy");
}

bool NcclRank::memAlloc(void** ptr, size_t bytes) {
  return check(ncclMemAlloc(ptr, bytes), "ncclMemAlloc");
}

void NcclRank::memFree(void* ptr) {
  // At the end of the run; a failure here has nobody left to tell.
  (void)ncclMemFree(ptr);
}

}  // namespace hc::bench
