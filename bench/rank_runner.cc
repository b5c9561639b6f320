#include "bench/rank_runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

#include "bench/check_data.h"
#include "bench/daemon_cpu.h"
#include "bench/perf_api_nccl.h"
#include "bench/rank_buffers.h"

namespace hc::bench {
namespace {

using Clock = std::chrono::steady_clock;

double microsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

class RankRunner {
 public:
  RankRunner(const Options& opts, const std::vector<Case>& cases, int rank, const RankLink& link)
      : opts_(opts),
        cases_(cases),
        rank_(rank),
        fd_(link.reportFd),
        gateFd_(link.gateFd),
        daemonPid_(rank == 0 ? link.daemonPid : -1),
        useNccl_(opts.api == Api::Nccl) {}

  int run(const hc_unique_id_t& id) {
    hc_status_t st = HC_OK;
    if (useNccl_) {
      if (!nccl_.init(opts_.nranks, id, rank_)) return failText(kInitCase, nccl_.error());
    } else {
      hc_config_t config = HC_CONFIG_INITIALIZER;
      config.host_small_ops = opts_.smallOps ? 1 : 0;
      if ((st = hc_comm_init_rank_config(&comm_, opts_.nranks, id, rank_, &config)) != HC_OK) {
        return fail(kInitCase, st, "hc_comm_init_rank_config", nullptr);
      }
    }
    // Allocated once, and touched before any timing; host buffers from ncclMemAlloc through
    // NCCL, else hc_mem_alloc.
    const size_t bytes = std::max<size_t>(maxBufferBytes(cases_), 4096);
    const char* call = "";
    if ((st = buffers_.allocate(placeOfRank(opts_, rank_), bytes, opts_.check != 0,
                                useNccl_ ? &nccl_ : nullptr, &call)) != HC_OK) {
      // ncclMemAlloc's failure has NCCL's text; the others have hc's.
      return !nccl_.error().empty() ? failText(kInitCase, nccl_.error())
                                    : fail(kInitCase, st, call, nullptr);
    }
    send_ = buffers_.send();
    recv_ = buffers_.recv();
    stream_ = buffers_.stream();
    for (size_t i = 0; i < cases_.size(); ++i) {
      if (cases_[i].measuredBound && !waitForGate()) return 1;
      if (int rc = runCase(static_cast<uint32_t>(i)); rc != 0) return rc;
    }
    const auto end = static_cast<uint32_t>(cases_.size());
    if (useNccl_) {
      if (!nccl_.finish()) return failText(end, nccl_.error());
    } else if ((st = hc_comm_finalize(comm_)) != HC_OK) {
      return fail(end, st, "hc_comm_finalize", comm_);
    } else if ((st = hc_comm_destroy(comm_)) != HC_OK) {
      return fail(end, st, "hc_comm_destroy", nullptr);
    }
    buffers_.release();
    return 0;
  }

 private:
  struct Buffers {
    const void* send;
    void* recv;
  };

  int runCase(uint32_t index) {
    const Case& c = cases_[index];
    CaseReport r{};
    r.caseIndex = index;
    r.rank = rank_;
    r.wrong[0] = r.wrong[1] = -1;
    // Operations without an in-place form report only the out-of-place side (r.timeUs[1] < 0).
    const int sides = hasInPlace(c.op) ? 2 : 1;
    r.timeUs[1] = -1;
    r.daemonCpuSec[0] = r.daemonCpuSec[1] = -1;
    hc_status_t st = timed(c, false, opts_.warmup, nullptr);
    for (int inPlace = 0; inPlace < sides && st == HC_OK; ++inPlace) {
      // The daemon's CPU time over the batch, read where this rank's timing starts and ends:
      // no other rank's operation of this batch completes outside that window.
      const double cpu0 = processCpuSeconds(daemonPid_);
      st = timed(c, inPlace != 0, opts_.iters, &r.timeUs[inPlace]);
      const double cpu1 = processCpuSeconds(daemonPid_);
      if (cpu0 >= 0 && cpu1 >= cpu0) r.daemonCpuSec[inPlace] = cpu1 - cpu0;
      // In latency mode the out-of-place samples give the median; no extra pass.
      if (st == HC_OK && opts_.latency && inPlace == 0) {
        r.medianUs = median(&samples_);
        r.tailUs[0] = percentile(&samples_, 0.1);
        r.tailUs[1] = percentile(&samples_, 0.9);
        r.hasMedian = 1;
      }
    }
    for (int inPlace = 0; inPlace < sides && st == HC_OK && opts_.check; ++inPlace) {
      st = checked(c, index, inPlace != 0, &r.wrong[inPlace]);
    }
    if (st == HC_OK && !opts_.latency && c.bytes <= kLatencyMaxBytes) {
      st = medianLatency(c, &r.medianUs);
      r.hasMedian = 1;
    }
    if (st != HC_OK && ncclFailed_) return failText(index, nccl_.error());
    if (st != HC_OK) return fail(index, st, ("hc_" + std::string(opName(c.op))).c_str(), comm_);
    return report(r) ? 0 : 1;
  }

  Buffers buffersFor(const Case& c, bool inPlace) const {
    if (!inPlace) return {send_, recv_};
    const size_t ws = dtypeSize(c.dtype);
    auto* s = static_cast<char*>(send_);
    auto* r = static_cast<char*>(recv_);
    switch (c.op) {
      case OpKind::AllGather:
      case OpKind::Gather:
        return {r + rank_ * c.sendInplaceOffset * ws, r};
      case OpKind::ReduceScatter:
      case OpKind::Scatter:
        return {s, s + rank_ * c.recvInplaceOffset * ws};
      default:
        return {r, r};
    }
  }

  // One operation; sendrecv is a group of two (its send request goes to *extra). Through NCCL
  // there are no requests: a NULL-stream call returns once the operation completed.
  hc_status_t issue(const Case& c, Buffers b, hc_request_t* req, hc_request_t* extra) {
    if (useNccl_) {
      if (nccl_.issue(c, b.send, b.recv, stream_)) return HC_OK;
      ncclFailed_ = true;  // the report takes nccl_.error(), not hc's last error
      return HC_INTERNAL;
    }
    const int n = opts_.nranks;
    switch (c.op) {
      case OpKind::AllReduce:
        return hc_allreduce(b.send, b.recv, c.count, c.dtype, c.redop, comm_, stream_, req);
      case OpKind::Broadcast:
        return hc_broadcast(b.send, b.recv, c.count, c.dtype, c.root, comm_, stream_, req);
      case OpKind::Reduce:
        return hc_reduce(b.send, b.recv, c.count, c.dtype, c.redop, c.root, comm_, stream_, req);
      case OpKind::AllGather:
        return hc_allgather(b.send, b.recv, c.sendCount, c.dtype, comm_, stream_, req);
      case OpKind::ReduceScatter:
        return hc_reduce_scatter(b.send, b.recv, c.recvCount, c.dtype, c.redop, comm_, stream_,
                                 req);
      case OpKind::AllToAll:
        return hc_alltoall(b.send, b.recv, c.count, c.dtype, comm_, stream_, req);
      case OpKind::Gather:
        return hc_gather(b.send, b.recv, c.count, c.dtype, c.root, comm_, stream_, req);
      case OpKind::Scatter:
        return hc_scatter(b.send, b.recv, c.count, c.dtype, c.root, comm_, stream_, req);
      case OpKind::SendRecv: {
        hc_status_t st = hc_group_start();
        if (st == HC_OK) {
          st = hc_send(b.send, c.count, c.dtype, (rank_ + 1) % n, comm_, stream_, extra);
        }
        if (st == HC_OK) {
          st = hc_recv(b.recv, c.count, c.dtype, (rank_ + n - 1) % n, comm_, stream_, req);
        }
        hc_status_t end = hc_group_end();
        return st != HC_OK ? st : end;
      }
      case OpKind::Barrier:
        return hc_barrier(comm_, stream_, req);
    }
    return HC_INTERNAL;
  }

  // Waits for an issued operation (both requests of a sendrecv); nothing for an NCCL call.
  static hc_status_t waitIssued(hc_request_t* req, hc_request_t* extra) {
    hc_status_t st = *extra != nullptr ? hc_wait(extra) : HC_OK;
    hc_status_t main = *req != nullptr ? hc_wait(req) : HC_OK;
    return st != HC_OK ? st : main;
  }

  // Issues iters operations back to back, then waits for them in order and for the stream
  // (nccl-tests times a launched batch up to cudaStreamSynchronize, not each call). On a stream
  // (device buffers) an operation is submitted only when the one before it has completed, as
  // on a GPU stream; without one they may overlap in the daemon. Back-pressure (HC_NO_RESOURCE) is
  // absorbed by waiting for the oldest outstanding operation; that wait is part of the measured
  // time, as it would be for a trainer. Through NCCL with the NULL stream each call returns once
  // its operation completed, so a batch runs one operation at a time there.
  hc_status_t timed(const Case& c, bool inPlace, int iters, double* us) {
    if (opts_.latency) return timedAlone(c, inPlace, iters, us);
    Buffers b = buffersFor(c, inPlace);
    requests_.assign(static_cast<size_t>(iters), nullptr);
    extras_.assign(static_cast<size_t>(iters), nullptr);
    size_t waited = 0;
    auto t0 = Clock::now();
    for (size_t i = 0; i < requests_.size(); ++i) {
      hc_status_t st;
      while ((st = issue(c, b, &requests_[i], &extras_[i])) == HC_NO_RESOURCE && waited < i) {
        if ((st = waitIssued(&requests_[waited], &extras_[waited])) != HC_OK) return st;
        ++waited;
      }
      if (st != HC_OK) return st;
    }
    for (; waited < requests_.size(); ++waited) {
      if (hc_status_t st = waitIssued(&requests_[waited], &extras_[waited]); st != HC_OK) {
        return st;
      }
    }
    if (hc_status_t st = buffers_.synchronize(); st != HC_OK) return st;
    if (us != nullptr) *us = iters > 0 ? microsSince(t0) / iters : 0.0;
    return HC_OK;
  }

  // Latency mode: each operation alone, issued once the one before it completed; its time goes
  // to samples_ and *us gets their mean.
  hc_status_t timedAlone(const Case& c, bool inPlace, int iters, double* us) {
    Buffers b = buffersFor(c, inPlace);
    samples_.clear();
    samples_.reserve(static_cast<size_t>(iters));
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      auto t0 = Clock::now();
      if (hc_status_t st = runOnce(c, b); st != HC_OK) return st;
      samples_.push_back(microsSince(t0));
      total += samples_.back();
    }
    if (us != nullptr) *us = iters > 0 ? total / iters : 0.0;
    return HC_OK;
  }

  hc_status_t runOnce(const Case& c, Buffers b) {
    hc_request_t req = nullptr;
    hc_request_t extra = nullptr;
    hc_status_t st = issue(c, b, &req, &extra);
    if (st == HC_OK) st = waitIssued(&req, &extra);
    return st == HC_OK ? buffers_.synchronize() : st;
  }

  // One operation on seeded inputs; counts the wrong output elements this rank can see. The data
  // is written and read through buffers_.hostView(), which is the buffer itself on the host and
  // a mirror that travels by copies for device buffers.
  hc_status_t checked(const Case& c, uint32_t index, bool inPlace, int64_t* wrong) {
    DataSpec spec{c.dtype, c.redop, opts_.nranks, opts_.seed + 2 * uint64_t{index} + inPlace};
    Buffers b = buffersFor(c, inPlace);
    char* recv = buffers_.hostView(b.recv);
    char* send = buffers_.hostView(b.send);
    const size_t ws = dtypeSize(c.dtype);
    fillSentinel(c.dtype, c.recvCount, recv);
    bool hasInput = true;
    switch (c.op) {
      case OpKind::Broadcast:  // only the root's input matters; others start from the sentinel
      case OpKind::Scatter:
        hasInput = rank_ == c.root;
        break;
      case OpKind::Barrier:
        hasInput = false;
        break;
      default:
        break;
    }
    if (hasInput) fillInput(spec, rank_, 0, c.sendCount, send);
    // In place, the input may lie inside the receive buffer: both views are final before either
    // is uploaded, so the order of the copies does not matter.
    hc_status_t st = buffers_.upload(b.recv, c.recvCount * ws);
    if (st == HC_OK && hasInput) st = buffers_.upload(b.send, c.sendCount * ws);
    if (st == HC_OK) st = runOnce(c, b);
    if (st == HC_OK) st = buffers_.download(b.recv, c.recvCount * ws);
    if (st != HC_OK) return st;
    size_t bad = 0;
    switch (c.op) {
      case OpKind::AllReduce:
        bad = countWrongReduced(spec, 0, c.recvCount, recv);
        break;
      case OpKind::Reduce:  // non-root receive buffers are unspecified
        if (rank_ == c.root) bad = countWrongReduced(spec, 0, c.recvCount, recv);
        break;
      case OpKind::Broadcast:
        bad = countWrongCopied(spec, c.root, 0, c.recvCount, recv);
        break;
      case OpKind::AllGather:
        for (int r = 0; r < opts_.nranks; ++r) {
          bad += countWrongCopied(spec, r, 0, c.sendCount, recv + r * c.sendCount * ws);
        }
        break;
      case OpKind::ReduceScatter:
        bad = countWrongReduced(spec, rank_ * c.recvCount, c.recvCount, recv);
        break;
      case OpKind::AllToAll:  // block r came from rank r's block for this rank
        for (int r = 0; r < opts_.nranks; ++r) {
          bad += countWrongCopied(spec, r, rank_ * c.count, c.count, recv + r * c.count * ws);
        }
        break;
      case OpKind::Gather:  // non-root receive buffers are unspecified
        for (int r = 0; r < opts_.nranks && rank_ == c.root; ++r) {
          bad += countWrongCopied(spec, r, 0, c.count, recv + r * c.count * ws);
        }
        break;
      case OpKind::Scatter:
        bad = countWrongCopied(spec, c.root, rank_ * c.count, c.count, recv);
        break;
      case OpKind::SendRecv:
        bad = countWrongCopied(spec, (rank_ + opts_.nranks - 1) % opts_.nranks, 0, c.count, recv);
        break;
      case OpKind::Barrier:
        break;
    }
    *wrong = static_cast<int64_t>(bad);
    return HC_OK;
  }

  // Per-operation latency of blocking calls (post, then wait), the median of opts_.iters.
  hc_status_t medianLatency(const Case& c, double* us) {
    hc_status_t st = timedAlone(c, false, opts_.iters, nullptr);
    if (st == HC_OK) *us = median(&samples_);
    return st;
  }

  // The sample of rank floor(q * (n - 1)) in *samples (reordered); 0 when empty.
  static double percentile(std::vector<double>* samples, double q) {
    if (samples->empty()) return 0.0;
    auto at =
        samples->begin() + static_cast<ptrdiff_t>(q * static_cast<double>(samples->size() - 1));
    std::nth_element(samples->begin(), at, samples->end());
    return *at;
  }

  // The median of *samples (reordered); 0 when empty.
  static double median(std::vector<double>* samples) {
    if (samples->empty()) return 0.0;
    auto mid = samples->begin() + samples->size() / 2;
    std::nth_element(samples->begin(), mid, samples->end());
    double m = *mid;
    if (samples->size() % 2 == 0) m = (m + *std::max_element(samples->begin(), mid)) / 2;
    return m;
  }

  // errComm: the communicator the failed call was made on, or null for calls on none (and for
  // hc_comm_destroy, after which the handle is gone). Asking a communicator for its last error
  // replaces this thread's last error of any call, so only the right one is asked.
  int fail(uint32_t index, hc_status_t st, const char* call, hc_comm_t errComm) {
    CaseReport r{};
    r.caseIndex = index;
    r.rank = rank_;
    r.status = st == HC_OK ? HC_INTERNAL : st;
    const char* detail = hc_get_last_error(errComm);
    if (detail == nullptr || *detail == '\0') detail = "(no detail)";
    std::snprintf(r.message, sizeof(r.message), "%s failed: %s: %s", call, hc_get_error_string(st),
                  detail);
    report(r);
    return 1;
  }

  // A failure whose text is already written (NCCL's, from nccl_.error()).
  int failText(uint32_t index, const std::string& text) {
    CaseReport r{};
    r.caseIndex = index;
    r.rank = rank_;
    r.status = HC_INTERNAL;
    std::snprintf(r.message, sizeof(r.message), "%s", text.c_str());
    report(r);
    return 1;
  }

  // Blocks until the parent lets this case start (one byte per rank and case).
  bool waitForGate() {
    char go;
    for (;;) {
      ssize_t n = ::read(gateFd_, &go, 1);
      if (n == 1) return true;
      if (n < 0 && errno == EINTR) continue;
      return false;  // the parent is gone or closed the gate: end the rank
    }
  }

  bool report(const CaseReport& r) {
    const char* p = reinterpret_cast<const char*>(&r);
    size_t left = sizeof(r);
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      left -= static_cast<size_t>(n);
    }
    return true;
  }

  const Options& opts_;
  const std::vector<Case>& cases_;
  const int rank_;
  const int fd_;
  const int gateFd_;
  const pid_t daemonPid_;  // rank 0 only; -1 elsewhere
  const bool useNccl_;     // --api nccl: nccl_ holds the communicator, comm_ stays null
  hc_comm_t comm_ = nullptr;
  NcclRank nccl_;
  bool ncclFailed_ = false;  // an NCCL call failed: its text is nccl_.error()
  RankBuffers buffers_;
  void* send_ = nullptr;  // buffers_'s, and its stream (null for host buffers)
  void* recv_ = nullptr;
  hc_stream_t stream_ = nullptr;
  std::vector<hc_request_t> requests_;
  std::vector<hc_request_t> extras_;  // sendrecv: the send of each timed iteration
  std::vector<double> samples_;       // timedAlone's per-operation times, in us
};

}  // namespace

int runRank(const Options& opts, const std::vector<Case>& cases, const hc_unique_id_t& id, int rank,
            const RankLink& link) {
  // A rank outliving the parent would wait in a collective forever; die with it instead.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != link.parent) return 1;  // the parent died before prctl took effect
  RankRunner runner(opts, cases, rank, link);
  return runner.run(id);
}

}  // namespace hc::bench
