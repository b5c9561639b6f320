#include <cstring>
#include <string>
#include <type_traits>

#include "tests/integration/worker_cases.h"

namespace hc::integ {
namespace {

constexpr uint8_t kSentinel = 0xA5;
// Bytes after each receive region that must stay untouched: catches writes past the end.
constexpr uint64_t kGuardBytes = 64;

template <typename T>
std::string toText(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::to_string(static_cast<double>(v));
  } else if constexpr (std::is_signed_v<T>) {
    return std::to_string(static_cast<int64_t>(v));
  } else {
    return std::to_string(static_cast<uint64_t>(v));
  }
}

// Counts wrong elements of one case and remembers the first.
struct Checker {
  CaseResult* result;

  template <typename T>
  void expect(const char* where, uint64_t index, T got, T want) {
    if (got == want) return;
    if (result->wrong++ == 0) {
      result->firstWrong = std::string(where) + "[" + std::to_string(index) + "] = " + toText(got) +
                           ", expected " + toText(want);
    }
  }

  void expectUntouched(const char* where, const uint8_t* p, uint64_t bytes) {
    for (uint64_t i = 0; i < bytes; ++i) {
      if (p[i] == kSentinel) continue;
      if (result->wrong++ == 0) {
        result->firstWrong = std::string(where) + " byte " + std::to_string(i) + " was written (" +
                             std::to_string(p[i]) + ")";
      }
    }
  }
};

}  // namespace

CaseRunner::CaseRunner(hc_comm_t comm, int rank, int nranks)
    : comm_(comm), rank_(rank), nranks_(nranks) {}

CaseRunner::~CaseRunner() {
  for (auto& [dtype, op] : premulOps_) (void)hc_redop_destroy(op, comm_);
  (void)hc_mem_free(a_);
  (void)hc_mem_free(b_);
}

std::string CaseRunner::allocate(uint64_t maxCount) {
  bytes_ = static_cast<uint64_t>(nranks_) * maxCount * sizeof(uint64_t) + kGuardBytes;
  void* a = nullptr;
  void* b = nullptr;
  if (hc_mem_alloc(&a, bytes_) != HC_OK || hc_mem_alloc(&b, bytes_) != HC_OK) {
    return "hc_mem_alloc(" + std::to_string(bytes_) + "): " + hc_get_last_error(nullptr);
  }
  a_ = static_cast<uint8_t*>(a);
  b_ = static_cast<uint8_t*>(b);
  for (hc_dtype_t dtype : kAllDtypes) {
    std::string error;
    visitDtype(dtype, [&]<typename T>() {
      T scalar = premulScalar<T>(rank_);
      hc_redop_t op;
      if (hc_redop_create_premul_sum(&op, &scalar, dtype, HC_SCALAR_HOST_IMMEDIATE, comm_) !=
          HC_OK) {
        error = "hc_redop_create_premul_sum(" + std::string(dtypeName(dtype)) + ") failed";
        return;
      }
      premulOps_[dtype] = op;
    });
    if (!error.empty()) return error;
  }
  return "";
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
  }
  return HC_SUM;
}

hc_status_t CaseRunner::issue(const Case& c, const void* send, void* recv) {
  hc_request_t req = nullptr;
  hc_status_t rc = HC_OK;
  switch (c.coll) {
    case Coll::AllReduce:
      rc = hc_allreduce(send, recv, c.count, c.dtype, redopFor(c), comm_, nullptr, &req);
      break;
    case Coll::Broadcast:
      rc = hc_broadcast(send, recv, c.count, c.dtype, c.root, comm_, nullptr, &req);
      break;
    case Coll::Reduce:
      rc = hc_reduce(send, recv, c.count, c.dtype, redopFor(c), c.root, comm_, nullptr, &req);
      break;
    case Coll::AllGather:
      rc = hc_allgather(send, recv, c.count, c.dtype, comm_, nullptr, &req);
      break;
    case Coll::ReduceScatter:
      rc = hc_reduce_scatter(send, recv, c.count, c.dtype, redopFor(c), comm_, nullptr, &req);
      break;
    case Coll::Barrier:
      rc = hc_barrier(comm_, nullptr, &req);
      break;
  }
  if (rc != HC_OK) return rc;
  return hc_wait(&req);
}

CaseResult CaseRunner::run(const Case& c) {
  CaseResult result;
  Checker check{&result};
  const uint64_t n = c.count;
  const uint64_t nr = static_cast<uint64_t>(nranks_);
  const uint64_t rank = static_cast<uint64_t>(rank_);
  visitDtype(c.dtype, [&]<typename T>() {
    T* a = reinterpret_cast<T*>(a_);
    T* b = reinterpret_cast<T*>(b_);
    auto in = [&](int r, uint64_t j) { return inputValue<T>(c.seed, r, j, c.red, nranks_); };
    auto fill = [&](T* dst, uint64_t elems) {
      for (uint64_t j = 0; j < elems; ++j) dst[j] = in(rank_, j);
    };
    // Elements this rank sends, and the extent of b that the op may write.
    uint64_t sendElems = c.coll == Coll::ReduceScatter ? nr * n : n;
    uint64_t recvElems = c.coll == Coll::AllGather ? nr * n : n;
    uint64_t bExtent = (c.inPlace && c.coll == Coll::ReduceScatter) ? nr * n : recvElems;
    std::memset(b_, kSentinel, bExtent * sizeof(T) + kGuardBytes);
    const void* send = a;
    void* recv = b;
    if (!c.inPlace) {
      fill(a, sendElems);
    } else if (c.coll == Coll::AllGather) {
      send = b + rank * n;  // NCCL in-place allgather: sendbuff == recvbuff + rank*sendcount
      fill(b + rank * n, n);
    } else if (c.coll == Coll::ReduceScatter) {
      send = b;  // NCCL in-place reduce_scatter: recvbuff == sendbuff + rank*recvcount
      recv = b + rank * n;
      fill(b, sendElems);
    } else {
      send = b;
      if (c.coll != Coll::Broadcast || c.root == rank_) fill(b, sendElems);
    }
    if (c.coll == Coll::Barrier) send = recv = nullptr;

    result.status = issue(c, send, recv);
    if (result.status != HC_OK) {
      const char* text = hc_get_last_error(comm_);
      result.error = text != nullptr ? text : "(null)";
      return;
    }
    const T* got = static_cast<const T*>(recv);
    switch (c.coll) {
      case Coll::AllReduce:
        for (uint64_t i = 0; i < n; ++i) {
          check.expect("recv", i, got[i], expectedReduction<T>(c.seed, i, c.red, nranks_));
        }
        break;
      case Coll::Broadcast:
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], in(c.root, i));
        break;
      case Coll::Reduce:
        if (c.root == rank_) {
          for (uint64_t i = 0; i < n; ++i) {
            check.expect("recv", i, got[i], expectedReduction<T>(c.seed, i, c.red, nranks_));
          }
        } else if (c.inPlace) {
          for (uint64_t i = 0; i < n; ++i) check.expect("send (non-root)", i, got[i], in(rank_, i));
        } else {
          check.expectUntouched("recv of a non-root rank", b_, n * sizeof(T));
        }
        break;
      case Coll::AllGather:
        for (uint64_t r = 0; r < nr; ++r) {
          for (uint64_t i = 0; i < n; ++i) {
            check.expect("recv", r * n + i, got[r * n + i], in(static_cast<int>(r), i));
          }
        }
        break;
      case Coll::ReduceScatter:
        for (uint64_t i = 0; i < n; ++i) {
          check.expect("recv", i, got[i],
                       expectedReduction<T>(c.seed, rank * n + i, c.red, nranks_));
        }
        break;
      case Coll::Barrier:
        break;
    }
    if (c.coll != Coll::Barrier) {
      check.expectUntouched("guard after recv", b_ + bExtent * sizeof(T), kGuardBytes);
    }
    if (!c.inPlace && c.coll != Coll::Barrier) {
      for (uint64_t j = 0; j < sendElems; ++j)
        check.expect("send (modified)", j, a[j], in(rank_, j));
    }
  });
  return result;
}

}  // namespace hc::integ
