// CaseRunner: owns one rank's buffers and operators and issues each case through the public API.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"

namespace hc::integ {
namespace {

// Room for the guard bytes and the alltoallv gaps beyond nranks * maxCount elements.
constexpr uint64_t kSlackBytes = 4096;
constexpr size_t kScalarSlot = 16;

}  // namespace

CaseRunner::CaseRunner(hc_comm_t comm, int rank, int nranks, DeviceChoice device)
    : comm_(comm), rank_(rank), nranks_(nranks), choice_(device) {}

CaseRunner::~CaseRunner() {
  for (auto& [dtype, op] : premulOps_) (void)hc_redop_destroy(op, comm_);
  for (auto& [dtype, op] : premulBufferOps_) (void)hc_redop_destroy(op, comm_);
  (void)hc_mem_free(scalars_);
  if (stream_ != nullptr) device_->destroyStream(stream_);
  // a_ and b_ go before device_ (declared after it).
}

std::string CaseRunner::allocate(uint64_t maxCount) {
  const uint64_t elems = static_cast<uint64_t>(nranks_) * maxCount + alltoallvSlack(nranks_);
  bytes_ = elems * sizeof(uint64_t) + kSlackBytes;
  if (choice_.onDevice()) {
    DeviceStatus opened;
    device_ = makeWorkerDevice(choice_, &opened);
    if (device_ == nullptr) return opened.error;
    if (DeviceStatus s = device_->createStream(&stream_); !s.ok()) return s.error;
  }
  for (MirroredBuffer* buffer : {&a_, &b_}) {
    if (DeviceStatus s = buffer->allocate(device_.get(), bytes_); !s.ok()) return s.error;
  }
  void* s = nullptr;
  if (hc_mem_alloc(&s, 4096) != HC_OK) {
    return "hc_mem_alloc(4096): " + std::string(hc_get_last_error(nullptr));
  }
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

hc_status_t CaseRunner::post(const Case& c, const void* send, void* recv, hc_stream_t stream,
                             std::vector<hc_request_t>* reqs) {
  reqs->reserve(2);  // the pointers below stay valid
  hc_request_t* req = &reqs->emplace_back(nullptr);
  const hc_redop_t op = isReduction(c.coll) ? redopFor(c) : HC_SUM;
  switch (c.coll) {
    case Coll::AllReduce:
      return hc_allreduce(send, recv, c.count, c.dtype, op, comm_, stream, req);
    case Coll::Broadcast:
      return hc_broadcast(send, recv, c.count, c.dtype, c.root, comm_, stream, req);
    case Coll::Reduce:
      return hc_reduce(send, recv, c.count, c.dtype, op, c.root, comm_, stream, req);
    case Coll::AllGather:
      return hc_allgather(send, recv, c.count, c.dtype, comm_, stream, req);
    case Coll::ReduceScatter:
      return hc_reduce_scatter(send, recv, c.count, c.dtype, op, comm_, stream, req);
    case Coll::AllToAll:
      return hc_alltoall(send, recv, c.count, c.dtype, comm_, stream, req);
    case Coll::AllToAllV: {
      AllToAllVLayout l = alltoallvLayout(c, rank_, nranks_);
      return hc_alltoallv(send, l.sendCounts.data(), l.sendDispls.data(), recv, l.recvCounts.data(),
                          l.recvDispls.data(), c.dtype, comm_, stream, req);
    }
    case Coll::Gather:
      return hc_gather(send, recv, c.count, c.dtype, c.root, comm_, stream, req);
    case Coll::Scatter:
      return hc_scatter(send, recv, c.count, c.dtype, c.root, comm_, stream, req);
    case Coll::SendRecv: {
      // Even ranks post the send first and odd ranks the receive: a group must not care.
      const int next = (rank_ + 1) % nranks_;
      const int prev = (rank_ + nranks_ - 1) % nranks_;
      hc_request_t* sendReq = &reqs->emplace_back(nullptr);
      if (hc_status_t rc = hc_group_start(); rc != HC_OK) return rc;
      hc_status_t first, second;
      if (rank_ % 2 == 0) {
        first = hc_send(send, c.count, c.dtype, next, comm_, stream, sendReq);
        second = hc_recv(recv, c.count, c.dtype, prev, comm_, stream, req);
      } else {
        first = hc_recv(recv, c.count, c.dtype, prev, comm_, stream, req);
        second = hc_send(send, c.count, c.dtype, next, comm_, stream, sendReq);
      }
      hc_status_t ended = hc_group_end();
      return first != HC_OK ? first : second != HC_OK ? second : ended;
    }
    case Coll::Barrier:
      return hc_barrier(comm_, stream, req);
  }
  return HC_INVALID_ARGUMENT;
}

hc_status_t CaseRunner::synchronizeStream(std::string* error) {
  // The stream reaches the end of the operation only after the daemon set its done flag: the
  // results are in device memory when this returns, before hc_wait takes the completion.
  if (stream_ == nullptr) return HC_OK;
  if (DeviceStatus s = device_->synchronize(stream_); !s.ok()) {
    *error = s.error;
    return s.status;
  }
  hc_status_t async = HC_OK;
  if (hc_comm_get_async_error(comm_, &async) != HC_OK) return HC_INTERNAL;
  return async;
}

hc_status_t CaseRunner::moveBuffers(bool toDevice, uint64_t bytes, std::string* error) {
  for (MirroredBuffer* buffer : {&a_, &b_}) {
    DeviceStatus s = toDevice ? buffer->toDevice(stream_, bytes) : buffer->toHost(stream_, bytes);
    if (!s.ok()) {
      *error = s.error;
      return s.status;
    }
  }
  return HC_OK;
}

CaseResult CaseRunner::run(const Case& c) {
  CaseResult result;
  CaseBuffers bufs;
  const bool user = c.mem == Mem::User;
  bufs.a = user ? userA_.get() : a_.shadow();
  bufs.b = user ? userB_.get() : b_.shadow();
  prepareCase(c, rank_, nranks_, &bufs);
  // What the operation gets: the device addresses of what was prepared in the shadows (the same
  // pointers on the host). User memory is host memory, never mirrored.
  const MirroredBuffer* inA = user ? nullptr : a_.holds(bufs.send) ? &a_ : &b_;
  const MirroredBuffer* outA = user ? nullptr : a_.holds(bufs.recv) ? &a_ : &b_;
  const void* send = user ? bufs.send : inA->deviceAddress(bufs.send);
  void* recv = user ? bufs.recv : outA->deviceAddress(bufs.recv);
  const bool mirrored = stream_ != nullptr && !user;
  const uint64_t span = std::min(caseBufferBytes(c, nranks_), bytes_);
  hc_stream_t stream = c.nullStream ? nullptr : stream_;
  std::string deviceError;
  hc_status_t rc = mirrored ? moveBuffers(true, span, &deviceError) : HC_OK;
  // An operation without a stream is submitted by the CPU at once: the copies must have landed.
  if (rc == HC_OK && mirrored && stream == nullptr) rc = synchronizeStream(&deviceError);
  if (c.red == Red::PreMulBuffer) setBufferScalar(c.dtype, true);
  std::vector<hc_request_t> reqs;
  if (rc == HC_OK) rc = post(c, send, recv, stream, &reqs);
  // On the stream the results come back in its order, queued before anything waits; without one,
  // only once the requests say the operation is done.
  if (rc == HC_OK && mirrored && stream != nullptr) rc = moveBuffers(false, span, &deviceError);
  if (stream != nullptr) {
    // Even after a failure: nothing may still be queued when the next case reuses the buffers.
    std::string syncError;
    if (hc_status_t sync = synchronizeStream(&syncError); rc == HC_OK) {
      rc = sync;
      deviceError = syncError;
    }
  }
  for (hc_request_t& req : reqs) {
    if (req == nullptr) continue;
    if (hc_status_t waited = hc_wait(&req); rc == HC_OK) rc = waited;
  }
  if (rc == HC_OK && mirrored && stream == nullptr) {
    rc = moveBuffers(false, span, &deviceError);
    if (rc == HC_OK) rc = synchronizeStream(&deviceError);
  }
  if (c.red == Red::PreMulBuffer) setBufferScalar(c.dtype, false);
  result.status = rc;
  if (rc != HC_OK) {
    // A refusal of the library itself may be recorded for the thread rather than the comm.
    const char* text = hc_get_last_error(comm_);
    if (text == nullptr || *text == '\0') text = hc_get_last_error(nullptr);
    result.error = !deviceError.empty() ? deviceError : text != nullptr ? text : "(null)";
    return result;
  }
  verifyCase(c, rank_, nranks_, bufs, &result);
  return result;
}

}  // namespace hc::integ
