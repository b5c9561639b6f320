// Seeded inputs and independently computed expected results for the rank worker.
//
// Every rank can regenerate every other rank's input from (seed, rank, index), so the expected
// result of a collective is computed locally, without trusting the daemon. Values are small
// (integers, or halves for floats) so that sums, products and pre-multiplied sums are exact in
// every dtype and in any order: correctness does not depend on the daemon's algorithm. Narrow
// floats (fp16, bf16, fp8) are accumulated in fp32 and rounded once, as the daemon promises; their
// inputs are bounded so that the fp32 sums stay exact, and for up to 4 ranks the results are
// representable too. Where they are not (avg over 3 ranks, fp8 sums over 5 or more), the one
// rounding is computed by common/numerics/narrow_float_reference.h (worker_values_test.cc checks
// both claims).
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "common/numerics/narrow_float_reference.h"
#include "hetero_comm/hc.h"

namespace hc::integ {

// The reference codec under the names the workers and their tests use.
using numerics::reference::BFloat16;
using numerics::reference::Fp8E4M3;
using numerics::reference::Fp8E5M2;
using numerics::reference::Half;
using numerics::reference::kIsNarrowFloat;
using numerics::reference::maxFiniteMiniFloat;
using numerics::reference::significandBits;

// The reductions the matrix covers. PreMul is hc_redop_create_premul_sum with a per-rank scalar
// passed by value; PreMulBuffer passes it in hc_mem_alloc memory (HC_SCALAR_DEVICE), which the
// daemon reads when the operation runs.
enum class Red { Sum, Prod, Max, Min, Avg, PreMul, PreMulBuffer };
inline constexpr Red kAllReds[] = {Red::Sum, Red::Prod,   Red::Max,         Red::Min,
                                   Red::Avg, Red::PreMul, Red::PreMulBuffer};

inline constexpr hc_dtype_t kAllDtypes[] = {HC_INT8,    HC_UINT8,    HC_INT32,      HC_UINT32,
                                            HC_INT64,   HC_UINT64,   HC_FLOAT16,    HC_FLOAT32,
                                            HC_FLOAT64, HC_BFLOAT16, HC_FLOAT8E4M3, HC_FLOAT8E5M2};

std::string_view dtypeName(hc_dtype_t dtype);
std::string_view redName(Red red);
size_t dtypeSize(hc_dtype_t dtype);
inline bool isPreMul(Red red) { return red == Red::PreMul || red == Red::PreMulBuffer; }

// Calls f.template operator()<T>() with the element type of dtype; false for values outside
// the enum.
template <typename F>
bool visitDtype(hc_dtype_t dtype, F&& f) {
  switch (dtype) {
    case HC_INT8:
      f.template operator()<int8_t>();
      return true;
    case HC_UINT8:
      f.template operator()<uint8_t>();
      return true;
    case HC_INT32:
      f.template operator()<int32_t>();
      return true;
    case HC_UINT32:
      f.template operator()<uint32_t>();
      return true;
    case HC_INT64:
      f.template operator()<int64_t>();
      return true;
    case HC_UINT64:
      f.template operator()<uint64_t>();
      return true;
    case HC_FLOAT16:
      f.template operator()<Half>();
      return true;
    case HC_FLOAT32:
      f.template operator()<float>();
      return true;
    case HC_FLOAT64:
      f.template operator()<double>();
      return true;
    case HC_BFLOAT16:
      f.template operator()<BFloat16>();
      return true;
    case HC_FLOAT8E4M3:
      f.template operator()<Fp8E4M3>();
      return true;
    case HC_FLOAT8E5M2:
      f.template operator()<Fp8E5M2>();
      return true;
    default:
      return false;
  }
}

// The type reductions of T are computed in: fp32 for the narrow floats, T itself otherwise.
template <typename T>
using AccOf = std::conditional_t<kIsNarrowFloat<T>, float, T>;

template <typename T>
AccOf<T> widen(T v) {
  if constexpr (kIsNarrowFloat<T>) {
    return v.toFloat();
  } else {
    return v;
  }
}

template <typename T>
T narrow(AccOf<T> v) {
  if constexpr (kIsNarrowFloat<T>) {
    return T::fromFloat(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
constexpr bool kIsFloatLike = kIsNarrowFloat<T> || std::is_floating_point_v<T>;

// The pre-multiplied-sum scalar rank r passes; it differs between ranks on purpose.
template <typename T>
T premulScalar(int rank) {
  return narrow<T>(static_cast<AccOf<T>>(rank % 3 + 1));
}

// Sum over ranks of |premulScalar|: how much larger than one input a pre-multiplied sum grows.
inline int64_t scalarTotal(int nranks) {
  int64_t total = 0;
  for (int r = 0; r < nranks; ++r) total += r % 3 + 1;
  return total;
}

inline uint64_t mixBits(uint64_t seed, int rank, uint64_t index) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull +
               index * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

// Largest magnitude of an input so that nranks inputs times the largest scalar (3) still fit.
template <typename T>
int64_t inputBound(int nranks) {
  int64_t limit = 1000;
  if constexpr (sizeof(T) == 1 && !kIsNarrowFloat<T>) {
    limit = static_cast<int64_t>(std::numeric_limits<T>::max()) / (3 * nranks);
  }
  return limit < 1 ? 1 : limit;
}

// Narrow floats take inputs k/2 with |k| <= this: the largest pre-multiplied sum, in halves,
// then fits the significand, so every sum is exact in fp32 and representable in T.
template <typename T>
int64_t halfStepBound(int nranks) {
  int64_t k = (int64_t{1} << significandBits<T>()) / scalarTotal(nranks);
  return k < 1 ? 1 : k;
}

// Any finite, non-negative-zero code of a narrow float: max/min and copies run over the whole
// range (subnormals, negatives, the largest values).
template <typename T>
T anyFiniteNarrow(uint64_t bits) {
  constexpr int kWidth = 8 * sizeof(T::bits);
  T v = T::fromBits(static_cast<uint32_t>(bits & ((uint64_t{1} << kWidth) - 1)));
  if (v.isNaN() || std::isinf(v.toFloat())) {
    // Clearing the exponent's top bit leaves a finite code of the same sign.
    v = T::fromBits(v.bits & ~(1u << (kWidth - 2)));
  }
  if (v.toFloat() == 0.0f) v = T::fromBits(0);  // -0 and +0 would make max/min ambiguous
  return v;
}

// Input element `index` of `rank` for a case with this seed and reduction.
template <typename T>
T inputValue(uint64_t seed, int rank, uint64_t index, Red red, int nranks) {
  uint64_t bits = mixBits(seed, rank, index);
  if (red == Red::Prod) {
    // {1, 2} (and -1 for signed types): |product| <= 2^6 even with many ranks.
    uint64_t pick = bits % (std::is_signed_v<AccOf<T>> ? 3 : 2);
    if (rank >= 6 && pick == 1) pick = 0;
    if (pick == 0) return narrow<T>(1);
    if (pick == 1) return narrow<T>(2);
    return narrow<T>(static_cast<AccOf<T>>(-1));
  }
  if constexpr (kIsNarrowFloat<T>) {
    if (red == Red::Max || red == Red::Min) return anyFiniteNarrow<T>(bits >> 7);
    int64_t bound = halfStepBound<T>(nranks);
    int64_t k = static_cast<int64_t>(bits % static_cast<uint64_t>(2 * bound + 1)) - bound;
    return T::fromFloat(static_cast<float>(k) * 0.5f);
  } else {
    int64_t bound = inputBound<T>(nranks);
    if constexpr (std::is_floating_point_v<T>) {
      // Halves: exact under every reduction here, and not representable as integers.
      int64_t k = static_cast<int64_t>(bits % static_cast<uint64_t>(4 * bound + 1)) - 2 * bound;
      return static_cast<T>(k) * static_cast<T>(0.5);
    } else if constexpr (std::is_signed_v<T>) {
      int64_t k = static_cast<int64_t>(bits % static_cast<uint64_t>(2 * bound + 1)) - bound;
      return static_cast<T>(k);
    } else {
      return static_cast<T>(bits % static_cast<uint64_t>(bound + 1));
    }
  }
}

// The reduction of element `index` over every rank's input, computed from the seeds.
template <typename T>
T expectedReduction(uint64_t seed, uint64_t index, Red red, int nranks) {
  using Acc = AccOf<T>;
  Acc acc = widen(inputValue<T>(seed, 0, index, red, nranks));
  if (isPreMul(red)) acc = static_cast<Acc>(acc * widen(premulScalar<T>(0)));
  for (int r = 1; r < nranks; ++r) {
    Acc v = widen(inputValue<T>(seed, r, index, red, nranks));
    switch (red) {
      case Red::Sum:
      case Red::Avg:
        acc = static_cast<Acc>(acc + v);
        break;
      case Red::Prod:
        acc = static_cast<Acc>(acc * v);
        break;
      case Red::Max:
        acc = v > acc ? v : acc;
        break;
      case Red::Min:
        acc = v < acc ? v : acc;
        break;
      case Red::PreMul:
      case Red::PreMulBuffer:
        acc = static_cast<Acc>(acc + v * widen(premulScalar<T>(r)));
        break;
    }
  }
  if (red == Red::Avg) {
    // NCCL's avg: floats multiply by 1/n (in fp32 for the narrow types), integers divide the
    // sum (truncating).
    if constexpr (kIsFloatLike<T>) {
      acc = static_cast<Acc>(acc * static_cast<Acc>(1.0 / nranks));
    } else {
      acc = static_cast<Acc>(acc / static_cast<Acc>(nranks));
    }
  }
  return narrow<T>(acc);
}

// Sum cases with values at the edges of the narrow float types. Saturate: every input is the
// largest finite value (alternating sign), so the fp32 sum of two or more ranks lies beyond the
// range and must come back as the largest finite value (fp8 saturates). NaN: rank 0 contributes
// a NaN to every third element, which must stay NaN.
enum class Special { None, Saturate, NaN };

template <typename T>
T specialInput(Special s, int rank, uint64_t index) {
  if constexpr (kIsNarrowFloat<T>) {
    if (s == Special::Saturate) {
      double m = maxFiniteMiniFloat(T::format());
      return T::fromDouble(index % 2 == 0 ? m : -m);
    }
    if (rank == 0 && index % 3 == 0) return T::fromDouble(std::numeric_limits<double>::quiet_NaN());
    return T::fromFloat(index % 2 == 0 ? 1.0f : -0.5f);
  } else {
    return T{};
  }
}

template <typename T>
T specialExpected(Special s, uint64_t index, int nranks) {
  if constexpr (kIsNarrowFloat<T>) {
    float sum = 0;
    for (int r = 0; r < nranks; ++r) sum += specialInput<T>(s, r, index).toFloat();
    return T::fromFloat(sum);
  } else {
    return T{};
  }
}

}  // namespace hc::integ
