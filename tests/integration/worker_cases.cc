#include <string>

#include "tests/integration/worker_cases.h"

namespace hc::integ {
namespace {

constexpr uint64_t kSmallCounts[] = {0, 1, 7, 4097};

constexpr Coll kDataColls[] = {
    Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter,
    Coll::AllToAll,  Coll::AllToAllV, Coll::Gather, Coll::Scatter,   Coll::SendRecv};

bool isNarrow(hc_dtype_t d) {
  return d == HC_FLOAT16 || d == HC_BFLOAT16 || d == HC_FLOAT8E4M3 || d == HC_FLOAT8E5M2;
}

// The 1Mi+3 cases dominate the run time (verifying a million elements costs far more than the
// operation), so only a subset runs large: every dtype through allreduce sum, and each operation,
// operator and placement through a few dtypes, enough to cover every large-message code path.
bool runsBig(Coll coll, hc_dtype_t dtype, Red red, bool inPlace) {
  const bool f32 = dtype == HC_FLOAT32;
  switch (coll) {
    case Coll::AllReduce:
      switch (red) {
        case Red::Sum:
          return !inPlace || f32 || dtype == HC_BFLOAT16;
        case Red::Avg:
          return !inPlace && (f32 || dtype == HC_INT32 || dtype == HC_FLOAT8E4M3);
        case Red::PreMul:
          return !inPlace && (dtype == HC_FLOAT16 || dtype == HC_INT64);
        case Red::PreMulBuffer:
          return !inPlace && f32;
        case Red::Max:
          return !inPlace && dtype == HC_INT32;
        case Red::Min:
          return !inPlace && dtype == HC_FLOAT8E5M2;
        case Red::Prod:
          return !inPlace && dtype == HC_FLOAT64;
      }
      return false;
    case Coll::AllGather:  // copies move bytes: the element type hardly matters
      return inPlace ? f32 : dtype == HC_INT8 || dtype == HC_FLOAT16 || dtype == HC_FLOAT64;
    case Coll::ReduceScatter:
      if (red == Red::Sum) {
        return inPlace ? f32 : f32 || dtype == HC_INT32 || dtype == HC_BFLOAT16;
      }
      return red == Red::Max && dtype == HC_INT32 && !inPlace;
    case Coll::Broadcast:
      return (dtype == HC_FLOAT64 || dtype == HC_UINT8) && !inPlace;
    case Coll::Reduce:
      return (dtype == HC_INT64 || dtype == HC_FLOAT16) && red == Red::Sum && !inPlace;
    case Coll::AllToAll:
    case Coll::AllToAllV:
    case Coll::SendRecv:
      return f32;
    case Coll::Gather:
    case Coll::Scatter:
      return f32 || (dtype == HC_INT8 && !inPlace);
    case Coll::Barrier:
      return false;
  }
  return false;
}

}  // namespace

std::string_view dtypeName(hc_dtype_t dtype) {
  switch (dtype) {
    case HC_INT8:
      return "int8";
    case HC_UINT8:
      return "uint8";
    case HC_INT32:
      return "int32";
    case HC_UINT32:
      return "uint32";
    case HC_INT64:
      return "int64";
    case HC_UINT64:
      return "uint64";
    case HC_FLOAT16:
      return "float16";
    case HC_FLOAT32:
      return "float32";
    case HC_FLOAT64:
      return "float64";
    case HC_BFLOAT16:
      return "bfloat16";
    case HC_FLOAT8E4M3:
      return "fp8_e4m3";
    case HC_FLOAT8E5M2:
      return "fp8_e5m2";
    default:
      return "dtype?";
  }
}

size_t dtypeSize(hc_dtype_t dtype) {
  size_t size = 0;
  visitDtype(dtype, [&]<typename T>() { size = sizeof(T); });
  return size;
}

std::string_view redName(Red red) {
  switch (red) {
    case Red::Sum:
      return "sum";
    case Red::Prod:
      return "prod";
    case Red::Max:
      return "max";
    case Red::Min:
      return "min";
    case Red::Avg:
      return "avg";
    case Red::PreMul:
      return "premul_sum(immediate)";
    case Red::PreMulBuffer:
      return "premul_sum(buffer)";
  }
  return "red?";
}

std::string_view collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce:
      return "allreduce";
    case Coll::Broadcast:
      return "broadcast";
    case Coll::Reduce:
      return "reduce";
    case Coll::AllGather:
      return "allgather";
    case Coll::ReduceScatter:
      return "reduce_scatter";
    case Coll::AllToAll:
      return "alltoall";
    case Coll::AllToAllV:
      return "alltoallv";
    case Coll::Gather:
      return "gather";
    case Coll::Scatter:
      return "scatter";
    case Coll::SendRecv:
      return "sendrecv";
    case Coll::Barrier:
      return "barrier";
  }
  return "coll?";
}

bool isReduction(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool hasRoot(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather ||
         coll == Coll::Scatter;
}

bool hasInPlace(Coll coll) {
  // All-to-all cannot run in place (every block is read by one rank and overwritten by
  // another); the library refuses it, which badargs mode checks.
  return coll != Coll::AllToAll && coll != Coll::AllToAllV && coll != Coll::SendRecv &&
         coll != Coll::Barrier;
}

std::string describe(const Case& c) {
  std::string s(collName(c.coll));
  if (c.coll == Coll::Barrier) return s;
  s += " " + std::string(dtypeName(c.dtype));
  if (isReduction(c.coll)) s += " " + std::string(redName(c.red));
  s += " count=" + std::to_string(c.count);
  if (hasRoot(c.coll)) s += " root=" + std::to_string(c.root);
  s += c.inPlace ? " in-place" : " out-of-place";
  if (c.mem == Mem::User) s += " user-memory";
  if (c.nullStream) s += " null-stream";
  if (c.special == Special::Saturate) s += " saturating-values";
  if (c.special == Special::NaN) s += " nan-values";
  if (c.coll == Coll::AllToAllV) {
    const char* names[] = {"mixed", "all-zero", "only-self", "silent-rank0", "ring"};
    s += std::string(" pattern=") + names[static_cast<int>(c.pattern)];
  }
  return s;
}

uint64_t alltoallvCount(const Case& c, int src, int dst, int nranks) {
  switch (c.pattern) {
    case Pattern::Mixed: {
      // A quarter of the pairs send nothing; the rest a third, two thirds or all of the count.
      uint64_t pick = (static_cast<uint64_t>(src) * 3 + static_cast<uint64_t>(dst) + c.seed) % 4;
      return c.count * pick / 3;
    }
    case Pattern::AllZero:
      return 0;
    case Pattern::OnlySelf:
      return src == dst ? c.count : 0;
    case Pattern::SilentRank0:
      return src == 0 ? 0 : c.count;
    case Pattern::Ring:
      return dst == (src + 1) % nranks ? c.count : 0;
  }
  return 0;
}

AllToAllVLayout alltoallvLayout(const Case& c, int rank, int nranks) {
  AllToAllVLayout l;
  const size_t n = static_cast<size_t>(nranks);
  l.sendCounts.resize(n);
  l.sendDispls.resize(n);
  l.recvCounts.resize(n);
  l.recvDispls.resize(n);
  // One element of gap after every block, so a write past a block's end shows up.
  for (int j = nranks - 1; j >= 0; --j) {
    l.sendCounts[j] = alltoallvCount(c, rank, j, nranks);
    l.sendDispls[j] = l.sendExtent;
    l.sendExtent += l.sendCounts[j] + 1;
  }
  for (int j = 0; j < nranks; ++j) {
    l.recvCounts[j] = alltoallvCount(c, j, rank, nranks);
    l.recvDispls[j] = l.recvExtent;
    l.recvExtent += l.recvCounts[j] + 1;
  }
  return l;
}

std::vector<Case> matrixCases(int nranks, uint64_t seed) {
  std::vector<Case> cases;
  auto add = [&](Case c) {
    c.seed = seed + cases.size();
    // Cycling the root through every rank across cases covers root != 0.
    c.root = static_cast<int>(cases.size() % static_cast<size_t>(nranks));
    cases.push_back(c);
  };
  for (hc_dtype_t dtype : kAllDtypes) {
    for (Coll coll : kDataColls) {
      std::vector<Red> reds = {Red::Sum};
      if (isReduction(coll)) reds.assign(std::begin(kAllReds), std::end(kAllReds));
      for (Red red : reds) {
        std::vector<uint64_t> counts(std::begin(kSmallCounts), std::end(kSmallCounts));
        counts.push_back(kBigCount);
        for (uint64_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(coll)) continue;
            if (count == kBigCount && !runsBig(coll, dtype, red, inPlace)) continue;
            add(Case{coll, dtype, red, count, inPlace});
          }
        }
      }
    }
    add(Case{Coll::Barrier, dtype});
    if (isNarrow(dtype)) {
      for (uint64_t count : {7, 4097}) {
        add(Case{Coll::AllReduce, dtype, Red::Sum, count, false, 0, 0, Mem::Shared, Special::NaN});
        if (dtype == HC_FLOAT8E4M3 || dtype == HC_FLOAT8E5M2) {
          add(Case{Coll::AllReduce, dtype, Red::Sum, count, count == 7, 0, 0, Mem::Shared,
                   Special::Saturate});
        }
      }
    }
  }
  // Plain heap memory, which the client stages through its segment: every operation, both
  // placements, a reduction type of each family.
  for (Coll coll : kDataColls) {
    for (hc_dtype_t dtype : {HC_FLOAT32, HC_BFLOAT16}) {
      for (uint64_t count : {7, 4097}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !hasInPlace(coll)) continue;
          add(Case{coll, dtype, isReduction(coll) ? Red::PreMul : Red::Sum, count, inPlace, 0, 0,
                   Mem::User});
        }
      }
    }
  }
  add(Case{Coll::AllReduce, HC_FLOAT32, Red::Sum, kBigCount, false, 0, 0, Mem::User});
  add(Case{Coll::AllToAll, HC_INT32, Red::Sum, kBigCount, false, 0, 0, Mem::User});
  return cases;
}

std::vector<Case> gpuCases(int nranks, uint64_t seed) {
  const hc_dtype_t dtypes[] = {HC_FLOAT32, HC_FLOAT16, HC_BFLOAT16, HC_INT32};
  const uint64_t counts[] = {0, 1, 7, kBigCount};
  std::vector<Case> cases;
  for (size_t d = 0; d < std::size(dtypes); ++d) {
    for (Coll coll : kDataColls) {
      std::vector<Red> reds = {Red::Sum};
      if (isReduction(coll)) reds.assign(std::begin(kAllReds), std::end(kAllReds));
      for (size_t r = 0; r < reds.size(); ++r) {
        for (size_t k = 0; k < std::size(counts); ++k) {
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(coll)) continue;
            Case c{coll, dtypes[d], reds[r], counts[k], inPlace};
            c.seed = seed + cases.size();
            c.root = static_cast<int>(cases.size() % static_cast<size_t>(nranks));
            // Every placement of every operation sees both kinds of stream across the counts.
            c.nullStream = (d + r + k + (inPlace ? 1 : 0)) % 2 == 1;
            cases.push_back(c);
          }
        }
      }
    }
    Case barrier{Coll::Barrier, dtypes[d]};
    barrier.nullStream = d % 2 == 1;
    cases.push_back(barrier);
  }
  return cases;
}

std::vector<Case> alltoallvCases(uint64_t seed) {
  std::vector<Case> cases;
  const Pattern patterns[] = {Pattern::AllZero, Pattern::OnlySelf, Pattern::SilentRank0,
                              Pattern::Ring, Pattern::Mixed};
  const hc_dtype_t dtypes[] = {HC_INT32, HC_FLOAT16, HC_FLOAT8E4M3, HC_FLOAT64};
  for (Pattern pattern : patterns) {
    for (size_t d = 0; d < std::size(dtypes); ++d) {
      for (uint64_t count : {1, 4097}) {
        Case c{Coll::AllToAllV, dtypes[d], Red::Sum, count, false, 0, seed + cases.size()};
        c.pattern = pattern;
        for (Mem mem : {Mem::Shared, Mem::User}) {
          c.mem = mem;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

std::vector<Case> demoCases(int nranks, uint64_t seed) {
  std::vector<Case> cases;
  const uint64_t counts[] = {1, 4097, kBigCount};
  for (Coll coll : kDataColls) {
    for (uint64_t count : counts) {
      Case c{coll, HC_FLOAT32, Red::Sum, count, false, 0, seed + cases.size()};
      c.root = nranks - 1;
      cases.push_back(c);
    }
  }
  cases.push_back(Case{Coll::AllReduce, HC_INT64, Red::Avg, 4097, true, 0, seed + cases.size()});
  cases.push_back(
      Case{Coll::AllReduce, HC_BFLOAT16, Red::Sum, 4097, false, 0, seed + cases.size()});
  cases.push_back(Case{Coll::Barrier, HC_INT8, Red::Sum, 0, false, 0, seed + cases.size()});
  return cases;
}

}  // namespace hc::integ
