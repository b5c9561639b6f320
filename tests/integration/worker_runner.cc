// CaseRunner: owns one rank's buffers and operators and issues each case through the public API.
#include <cstring>
#include <string>

#include "tests/integration/worker_cases.h"

namespace hc::integ {
namespace {

// Room for the guard bytes and the alltoallv gaps beyond nranks * maxCount elements.
constexpr uint64_t kSlackBytes = 4096;
constexpr size_t kScalarSlot = 16;

}  // namespace

bool parseDeviceChoice(const std::string& text, DeviceChoice* out) {
  *out = DeviceChoice{};
  if (text.empty()) return true;
  const std::string nvidia = "sim:nvidia:", amd = "sim:amd:";
  std::string index;
  if (text.rfind(nvidia, 0) == 0) {
    out->vendor = HC_SIM_NVIDIA;
    index = text.substr(nvidia.size());
  } else if (text.rfind(amd, 0) == 0) {
    out->vendor = HC_SIM_AMD;
    index = text.substr(amd.size());
  } else {
    return false;
  }
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return false;
  out->sim = true;
  out->index = std::stoi(index);
  return true;
}

CaseRunner::CaseRunner(hc_comm_t comm, int rank, int nranks, DeviceChoice device)
    : comm_(comm), rank_(rank), nranks_(nranks), device_(device) {}

CaseRunner::~CaseRunner() {
  for (auto& [dtype, op] : premulOps_) (void)hc_redop_destroy(op, comm_);
  for (auto& [dtype, op] : premulBufferOps_) (void)hc_redop_destroy(op, comm_);
  (void)hc_mem_free(scalars_);
  if (device_.sim) {
    if (stream_ != nullptr) (void)hc_sim_stream_destroy(stream_);
    (void)hc_sim_free(a_);
    (void)hc_sim_free(b_);
  } else {
    (void)hc_mem_free(a_);
    (void)hc_mem_free(b_);
  }
}

std::string CaseRunner::allocate(uint64_t maxCount) {
  const uint64_t elems = static_cast<uint64_t>(nranks_) * maxCount + alltoallvSlack(nranks_);
  bytes_ = elems * sizeof(uint64_t) + kSlackBytes;
  void* a = nullptr;
  void* b = nullptr;
  void* s = nullptr;
  if (device_.sim) {
    if (hc_sim_malloc(&a, bytes_, device_.vendor, device_.index) != HC_OK ||
        hc_sim_malloc(&b, bytes_, device_.vendor, device_.index) != HC_OK ||
        hc_sim_stream_create(&stream_, device_.vendor, device_.index) != HC_OK) {
      return "hc_sim_malloc(" + std::to_string(bytes_) + "): " + hc_get_last_error(nullptr);
    }
  } else if (hc_mem_alloc(&a, bytes_) != HC_OK || hc_mem_alloc(&b, bytes_) != HC_OK) {
    return "hc_mem_alloc(" + std::to_string(bytes_) + "): " + hc_get_last_error(nullptr);
  }
  if (hc_mem_alloc(&s, 4096) != HC_OK) {
    return "hc_mem_alloc(4096): " + std::string(hc_get_last_error(nullptr));
  }
  a_ = static_cast<uint8_t*>(a);
  b_ = static_cast<uint8_t*>(b);
  scalars_ = static_cast<uint8_t*>(s);
  userA_ = std::make_unique<uint8_t[]>(bytes_);
  userB_ = std::make_unique<uint8_t[]>(bytes_);
  for (hc_dtype_t dtype : kAllDtypes) {
    std::string error;
    visitDtype(dtype, [&]<typename T>() {
      const std::string name(dtypeName(dtype));
      T scalar = premulScalar<T>(rank_);
      hc_redop_t op;
      hc_status_t rc =
          hc_redop_create_premul_sum(&op, &scalar, dtype, HC_SCALAR_HOST_IMMEDIATE, comm_);
      if (rc != HC_OK) {
        error = "hc_redop_create_premul_sum(" + name +
                ", immediate) failed: " + hc_get_last_error(comm_);
        return;
      }
      premulOps_[dtype] = op;
      // The buffer holds a wrong value (zero) until just before each case that uses it: a
      // client or daemon that reads it at creation instead of when the op runs gets zeros.
      setBufferScalar(dtype, false);
      rc = hc_redop_create_premul_sum(&op, scalars_ + kScalarSlot * dtype, dtype, HC_SCALAR_DEVICE,
                                      comm_);
      if (rc != HC_OK) {
        error =
            "hc_redop_create_premul_sum(" + name + ", buffer) failed: " + hc_get_last_error(comm_);
        return;
      }
      premulBufferOps_[dtype] = op;
    });
    if (!error.empty()) return error;
  }
  return "";
}

void CaseRunner::setBufferScalar(hc_dtype_t dtype, bool valid) {
  visitDtype(dtype, [&]<typename T>() {
    T v = valid ? premulScalar<T>(rank_) : narrow<T>(0);
    std::memcpy(scalars_ + kScalarSlot * dtype, &v, sizeof(T));
  });
}

hc_redop_t CaseRunner::redopFor(const Case& c) {
  switch (c.red) {
    case Red::Sum:
      return HC_SUM;
    case Red::Prod:
      return HC_PROD;
    case Red::Max:
      return HC_MAX;
    case Red::Min:
      return HC_MIN;
    case Red::Avg:
      return HC_AVG;
    case Red::PreMul:
      return premulOps_.at(c.dtype);
    case Red::PreMulBuffer:
      return premulBufferOps_.at(c.dtype);
  }
  return HC_SUM;
}

hc_status_t CaseRunner::issue(const Case& c, const void* send, void* recv) {
  hc_request_t req = nullptr;
  hc_status_t rc = HC_OK;
  const hc_redop_t op = isReduction(c.coll) ? redopFor(c) : HC_SUM;
  switch (c.coll) {
    case Coll::AllReduce:
      rc = hc_allreduce(send, recv, c.count, c.dtype, op, comm_, stream_, &req);
      break;
    case Coll::Broadcast:
      rc = hc_broadcast(send, recv, c.count, c.dtype, c.root, comm_, stream_, &req);
      break;
    case Coll::Reduce:
      rc = hc_reduce(send, recv, c.count, c.dtype, op, c.root, comm_, stream_, &req);
      break;
    case Coll::AllGather:
      rc = hc_allgather(send, recv, c.count, c.dtype, comm_, stream_, &req);
      break;
    case Coll::ReduceScatter:
      rc = hc_reduce_scatter(send, recv, c.count, c.dtype, op, comm_, stream_, &req);
      break;
    case Coll::AllToAll:
      rc = hc_alltoall(send, recv, c.count, c.dtype, comm_, stream_, &req);
      break;
    case Coll::AllToAllV: {
      AllToAllVLayout l = alltoallvLayout(c, rank_, nranks_);
      rc = hc_alltoallv(send, l.sendCounts.data(), l.sendDispls.data(), recv, l.recvCounts.data(),
                        l.recvDispls.data(), c.dtype, comm_, stream_, &req);
      break;
    }
    case Coll::Gather:
      rc = hc_gather(send, recv, c.count, c.dtype, c.root, comm_, stream_, &req);
      break;
    case Coll::Scatter:
      rc = hc_scatter(send, recv, c.count, c.dtype, c.root, comm_, stream_, &req);
      break;
    case Coll::SendRecv: {
      // Even ranks post the send first and odd ranks the receive: a group must not care.
      const int next = (rank_ + 1) % nranks_;
      const int prev = (rank_ + nranks_ - 1) % nranks_;
      hc_request_t sendReq = nullptr;
      if ((rc = hc_group_start()) != HC_OK) return rc;
      hc_status_t first, second;
      if (rank_ % 2 == 0) {
        first = hc_send(send, c.count, c.dtype, next, comm_, stream_, &sendReq);
        second = hc_recv(recv, c.count, c.dtype, prev, comm_, stream_, &req);
      } else {
        first = hc_recv(recv, c.count, c.dtype, prev, comm_, stream_, &req);
        second = hc_send(send, c.count, c.dtype, next, comm_, stream_, &sendReq);
      }
      rc = hc_group_end();
      if (first != HC_OK) return first;
      if (second != HC_OK) return second;
      if (rc != HC_OK) return rc;
      if (hc_status_t sync = synchronizeStream(); sync != HC_OK) return sync;
      hc_status_t sendRc = hc_wait(&sendReq);
      hc_status_t recvRc = hc_wait(&req);
      return sendRc != HC_OK ? sendRc : recvRc;
    }
    case Coll::Barrier:
      rc = hc_barrier(comm_, stream_, &req);
      break;
  }
  if (rc != HC_OK) return rc;
  if (hc_status_t sync = synchronizeStream(); sync != HC_OK) return sync;
  return hc_wait(&req);
}

hc_status_t CaseRunner::synchronizeStream() {
  // The stream reaches the end of the operation only after the daemon set its done flag: the
  // results are in device memory when this returns, before hc_wait takes the completion.
  if (stream_ == nullptr) return HC_OK;
  hc_status_t rc = hc_sim_stream_synchronize(stream_);
  if (rc != HC_OK) return rc;
  hc_status_t async = HC_OK;
  if (hc_comm_get_async_error(comm_, &async) != HC_OK) return HC_INTERNAL;
  return async;
}

CaseResult CaseRunner::run(const Case& c) {
  CaseResult result;
  CaseBuffers bufs;
  bufs.a = c.mem == Mem::User ? userA_.get() : a_;
  bufs.b = c.mem == Mem::User ? userB_.get() : b_;
  prepareCase(c, rank_, nranks_, &bufs);
  if (c.red == Red::PreMulBuffer) setBufferScalar(c.dtype, true);
  result.status = issue(c, bufs.send, bufs.recv);
  if (c.red == Red::PreMulBuffer) setBufferScalar(c.dtype, false);
  if (result.status != HC_OK) {
    // A refusal of the library itself may be recorded for the thread rather than the comm.
    const char* text = hc_get_last_error(comm_);
    if (text == nullptr || *text == '\0') text = hc_get_last_error(nullptr);
    result.error = text != nullptr ? text : "(null)";
    return result;
  }
  verifyCase(c, rank_, nranks_, bufs, &result);
  return result;
}

}  // namespace hc::integ
