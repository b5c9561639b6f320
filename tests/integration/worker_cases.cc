#include <string>

#include "tests/integration/worker_cases.h"

namespace hc::integ {
namespace {

constexpr uint64_t kSmallCounts[] = {0, 1, 7, 4097};

// The 1Mi+3 cases dominate the run time, so not every redop x placement runs large: every dtype
// runs allreduce, reduce_scatter and allgather large; the rest covers each code path once.
bool runsBig(Coll coll, hc_dtype_t dtype, Red red, bool inPlace) {
  bool core = dtype == HC_INT32 || dtype == HC_FLOAT32;
  switch (coll) {
    case Coll::AllGather:
      return true;
    case Coll::AllReduce:
      if (red == Red::Sum) return true;
      if (red == Red::Avg || red == Red::PreMul) return !inPlace;
      return core && !inPlace;
    case Coll::ReduceScatter:
      return red == Red::Sum || (core && !inPlace);
    case Coll::Broadcast:
      return (dtype == HC_FLOAT64 || dtype == HC_UINT8) && !inPlace;
    case Coll::Reduce:
      return (dtype == HC_INT64 || dtype == HC_FLOAT32) && red == Red::Sum;
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
    case HC_FLOAT32:
      return "float32";
    case HC_FLOAT64:
      return "float64";
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
      return "premul_sum";
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
    case Coll::Barrier:
      return "barrier";
  }
  return "coll?";
}

bool isReduction(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool hasRoot(Coll coll) { return coll == Coll::Broadcast || coll == Coll::Reduce; }

std::string describe(const Case& c) {
  std::string s(collName(c.coll));
  if (c.coll == Coll::Barrier) return s;
  s += " " + std::string(dtypeName(c.dtype));
  if (isReduction(c.coll)) s += " " + std::string(redName(c.red));
  s += " count=" + std::to_string(c.count);
  if (hasRoot(c.coll)) s += " root=" + std::to_string(c.root);
  s += c.inPlace ? " in-place" : " out-of-place";
  return s;
}

std::vector<Case> matrixCases(int nranks, uint64_t seed) {
  std::vector<Case> cases;
  const Coll colls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                        Coll::ReduceScatter};
  for (hc_dtype_t dtype : kAllDtypes) {
    for (Coll coll : colls) {
      std::vector<Red> reds = {Red::Sum};
      if (isReduction(coll)) reds.assign(std::begin(kAllReds), std::end(kAllReds));
      for (Red red : reds) {
        std::vector<uint64_t> counts(std::begin(kSmallCounts), std::end(kSmallCounts));
        counts.push_back(kBigCount);
        for (uint64_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (count == kBigCount && !runsBig(coll, dtype, red, inPlace)) continue;
            Case c{coll, dtype, red, count, inPlace, 0, seed + cases.size()};
            // Cycling the root through every rank across cases covers root != 0.
            c.root = static_cast<int>(cases.size() % static_cast<size_t>(nranks));
            cases.push_back(c);
          }
        }
      }
    }
    cases.push_back(Case{Coll::Barrier, dtype, Red::Sum, 0, false, 0, seed + cases.size()});
  }
  return cases;
}

std::vector<Case> demoCases(int nranks, uint64_t seed) {
  std::vector<Case> cases;
  const uint64_t counts[] = {1, 4097, kBigCount};
  const Coll colls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                        Coll::ReduceScatter};
  for (Coll coll : colls) {
    for (uint64_t count : counts) {
      Case c{coll, HC_FLOAT32, Red::Sum, count, false, 0, seed + cases.size()};
      c.root = nranks - 1;
      cases.push_back(c);
    }
  }
  cases.push_back(Case{Coll::AllReduce, HC_INT64, Red::Avg, 4097, true, 0, seed + cases.size()});
  cases.push_back(Case{Coll::Barrier, HC_INT8, Red::Sum, 0, false, 0, seed + cases.size()});
  return cases;
}

}  // namespace hc::integ
