// Inputs and verification of one case on one rank. Everything expected is derived from the seeds
// (worker_values.h); nothing is read back from the daemon except the buffers under test.
#include <cstdio>
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
  if constexpr (kIsNarrowFloat<T>) {
    char bits[16];
    std::snprintf(bits, sizeof(bits), "0x%x", static_cast<unsigned>(v.bits));
    return std::to_string(v.toFloat()) + " (bits " + bits + ")";
  } else if constexpr (std::is_floating_point_v<T>) {
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

// Copies move any finite value bit for bit, so they get the full-range inputs of max/min.
Red dataRed(const Case& c) { return isReduction(c.coll) ? c.red : Red::Max; }

// Elements this rank's send buffer holds for c.
uint64_t sendElems(const Case& c, int rank, int nranks) {
  const uint64_t nr = static_cast<uint64_t>(nranks);
  switch (c.coll) {
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return nr * c.count;
    case Coll::Scatter:
      return rank == c.root ? nr * c.count : 0;
    case Coll::Broadcast:
      return rank == c.root ? c.count : 0;
    case Coll::AllToAllV:
      return alltoallvLayout(c, rank, nranks).sendExtent;
    case Coll::Barrier:
      return 0;
    default:
      return c.count;
  }
}

// Elements of b the operation may write (or, in place, holds the input).
uint64_t bExtentOf(const Case& c, int rank, int nranks) {
  const uint64_t nr = static_cast<uint64_t>(nranks);
  switch (c.coll) {
    case Coll::AllGather:
    case Coll::AllToAll:
      return nr * c.count;
    case Coll::ReduceScatter:
      return c.inPlace ? nr * c.count : c.count;
    case Coll::Gather:
      return rank == c.root || !c.inPlace ? nr * c.count : c.count;
    case Coll::Scatter:
      return rank == c.root && c.inPlace ? nr * c.count : c.count;
    case Coll::AllToAllV:
      return alltoallvLayout(c, rank, nranks).recvExtent;
    case Coll::Barrier:
      return 0;
    default:
      return c.count;
  }
}

template <typename T>
struct TypedCase {
  const Case& c;
  int rank;
  int nranks;
  uint64_t n = c.count;
  uint64_t nr = static_cast<uint64_t>(nranks);

  T in(int r, uint64_t j) const {
    if (c.special != Special::None) return specialInput<T>(c.special, r, j);
    return inputValue<T>(c.seed, r, j, dataRed(c), nranks);
  }
  T reduced(uint64_t j) const {
    if (c.special != Special::None) return specialExpected<T>(c.special, j, nranks);
    return expectedReduction<T>(c.seed, j, c.red, nranks);
  }
  void fill(T* dst, uint64_t first, uint64_t elems) const {
    for (uint64_t j = 0; j < elems; ++j) dst[j] = in(rank, first + j);
  }

  void prepare(CaseBuffers* bufs) const {
    T* a = reinterpret_cast<T*>(bufs->a);
    T* b = reinterpret_cast<T*>(bufs->b);
    const uint64_t r = static_cast<uint64_t>(rank);
    const uint64_t sendN = sendElems(c, rank, nranks);
    bufs->bExtent = bExtentOf(c, rank, nranks);
    std::memset(bufs->b, kSentinel, bufs->bExtent * sizeof(T) + kGuardBytes);
    bufs->send = a;
    bufs->recv = b;
    if (c.coll == Coll::Barrier) {
      bufs->send = bufs->recv = nullptr;
      return;
    }
    if (!c.inPlace) {
      fill(a, 0, sendN);
      return;
    }
    switch (c.coll) {
      case Coll::AllGather:  // NCCL: sendbuff == recvbuff + rank * sendcount
        bufs->send = b + r * n;
        fill(b + r * n, 0, n);
        break;
      case Coll::ReduceScatter:  // NCCL: recvbuff == sendbuff + rank * recvcount
        bufs->send = b;
        bufs->recv = b + r * n;
        fill(b, 0, sendN);
        break;
      case Coll::Gather:  // the root's block of the gathered buffer is its send buffer
        bufs->send = rank == c.root ? b + r * n : b;
        fill(rank == c.root ? b + r * n : b, 0, n);
        break;
      case Coll::Scatter:  // the root's recvbuff is its own block of sendbuff
        bufs->send = b;
        bufs->recv = rank == c.root ? b + r * n : b;
        fill(b, 0, sendN);
        break;
      default:
        bufs->send = b;
        fill(b, 0, sendN);
        break;
    }
  }

  void verify(const CaseBuffers& bufs, Checker& check) const {
    const T* a = reinterpret_cast<const T*>(bufs.a);
    const T* b = reinterpret_cast<const T*>(bufs.b);
    const T* got = static_cast<const T*>(bufs.recv);
    const uint64_t r = static_cast<uint64_t>(rank);
    const bool isRoot = rank == c.root;
    switch (c.coll) {
      case Coll::AllReduce:
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], reduced(i));
        break;
      case Coll::Broadcast:
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], in(c.root, i));
        break;
      case Coll::Reduce:
        if (isRoot) {
          for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], reduced(i));
        } else if (c.inPlace) {
          for (uint64_t i = 0; i < n; ++i) check.expect("send (non-root)", i, b[i], in(rank, i));
        } else {
          check.expectUntouched("recv of a non-root rank", bufs.b, n * sizeof(T));
        }
        break;
      case Coll::AllGather:
        for (uint64_t k = 0; k < nr; ++k) {
          for (uint64_t i = 0; i < n; ++i) {
            check.expect("recv", k * n + i, got[k * n + i], in(static_cast<int>(k), i));
          }
        }
        break;
      case Coll::ReduceScatter:
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], reduced(r * n + i));
        break;
      case Coll::AllToAll:
        for (uint64_t k = 0; k < nr; ++k) {
          for (uint64_t i = 0; i < n; ++i) {
            check.expect("recv", k * n + i, got[k * n + i], in(static_cast<int>(k), r * n + i));
          }
        }
        break;
      case Coll::AllToAllV:
        verifyAllToAllV(bufs, check);
        break;
      case Coll::Gather:
        if (isRoot) {
          for (uint64_t k = 0; k < nr; ++k) {
            for (uint64_t i = 0; i < n; ++i) {
              check.expect("recv", k * n + i, b[k * n + i], in(static_cast<int>(k), i));
            }
          }
        } else if (c.inPlace) {
          for (uint64_t i = 0; i < n; ++i) check.expect("send (non-root)", i, b[i], in(rank, i));
        } else {
          check.expectUntouched("recv of a non-root rank", bufs.b, nr * n * sizeof(T));
        }
        break;
      case Coll::Scatter:
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], in(c.root, r * n + i));
        if (isRoot && c.inPlace) {  // the other blocks of the root's send buffer stay as they were
          for (uint64_t i = 0; i < nr * n; ++i) check.expect("send (root)", i, b[i], in(rank, i));
        }
        break;
      case Coll::SendRecv: {
        int prev = (rank + nranks - 1) % nranks;
        for (uint64_t i = 0; i < n; ++i) check.expect("recv", i, got[i], in(prev, i));
        break;
      }
      case Coll::Barrier:
        return;
    }
    check.expectUntouched("guard after recv", bufs.b + bufs.bExtent * sizeof(T), kGuardBytes);
    if (!c.inPlace) {
      const uint64_t sendN = sendElems(c, rank, nranks);
      for (uint64_t j = 0; j < sendN; ++j) check.expect("send (modified)", j, a[j], in(rank, j));
    }
  }

  void verifyAllToAllV(const CaseBuffers& bufs, Checker& check) const {
    const T* got = reinterpret_cast<const T*>(bufs.b);
    AllToAllVLayout mine = alltoallvLayout(c, rank, nranks);
    for (int j = 0; j < nranks; ++j) {
      // Peer j sent from its own layout's displacement for this rank.
      uint64_t from = alltoallvLayout(c, j, nranks).sendDispls[rank];
      uint64_t at = mine.recvDispls[j];
      for (uint64_t i = 0; i < mine.recvCounts[j]; ++i) {
        check.expect("recv", at + i, got[at + i], in(j, from + i));
      }
      check.expectUntouched("gap after a received block",
                            bufs.b + (at + mine.recvCounts[j]) * sizeof(T), sizeof(T));
    }
  }
};

}  // namespace

uint64_t caseBufferBytes(const Case& c, int nranks) {
  const uint64_t elems = static_cast<uint64_t>(nranks) * c.count + alltoallvSlack(nranks);
  return (elems * dtypeSize(c.dtype) + kGuardBytes + 63) / 64 * 64;
}

void fillTransfer(hc_dtype_t dtype, uint64_t count, uint64_t seed, int src, int nranks,
                  uint8_t* send) {
  visitDtype(dtype, [&]<typename T>() {
    T* p = reinterpret_cast<T*>(send);
    for (uint64_t j = 0; j < count; ++j) p[j] = inputValue<T>(seed, src, j, Red::Max, nranks);
  });
}

void clearTransfer(hc_dtype_t dtype, uint64_t count, uint8_t* recv) {
  std::memset(recv, kSentinel, count * dtypeSize(dtype) + kGuardBytes);
}

void verifyTransfer(hc_dtype_t dtype, uint64_t count, uint64_t seed, int src, int nranks,
                    const uint8_t* recv, CaseResult* out) {
  Checker check{out};
  visitDtype(dtype, [&]<typename T>() {
    const T* p = reinterpret_cast<const T*>(recv);
    for (uint64_t j = 0; j < count; ++j) {
      check.expect("recv", j, p[j], inputValue<T>(seed, src, j, Red::Max, nranks));
    }
    check.expectUntouched("guard after recv", recv + count * sizeof(T), kGuardBytes);
  });
}

void prepareCase(const Case& c, int rank, int nranks, CaseBuffers* bufs) {
  visitDtype(c.dtype, [&]<typename T>() { TypedCase<T>{c, rank, nranks}.prepare(bufs); });
}

void verifyCase(const Case& c, int rank, int nranks, const CaseBuffers& bufs, CaseResult* out) {
  Checker check{out};
  visitDtype(c.dtype, [&]<typename T>() { TypedCase<T>{c, rank, nranks}.verify(bufs, check); });
}

}  // namespace hc::integ
