// Seeded inputs and independently computed expected results for the rank worker.
//
// Every rank can regenerate every other rank's input from (seed, rank, index), so the expected
// result of a collective is computed locally, without trusting the daemon. Values are small
// (integers, or halves for floats) so that sums, products and pre-multiplied sums are exact in
// every dtype and in any order: correctness does not depend on the daemon's algorithm.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "hetero_comm/hc.h"

namespace hc::integ {

// The reductions the matrix covers; PreMul is hc_redop_create_premul_sum with a per-rank scalar.
enum class Red { Sum, Prod, Max, Min, Avg, PreMul };
inline constexpr Red kAllReds[] = {Red::Sum, Red::Prod, Red::Max, Red::Min, Red::Avg, Red::PreMul};

inline constexpr hc_dtype_t kAllDtypes[] = {HC_INT8,  HC_UINT8,  HC_INT32,   HC_UINT32,
                                            HC_INT64, HC_UINT64, HC_FLOAT32, HC_FLOAT64};

std::string_view dtypeName(hc_dtype_t dtype);
std::string_view redName(Red red);
size_t dtypeSize(hc_dtype_t dtype);

// Calls f.template operator()<T>() with the C++ type of dtype; false for dtypes the worker does
// not cover.
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
    case HC_FLOAT32:
      f.template operator()<float>();
      return true;
    case HC_FLOAT64:
      f.template operator()<double>();
      return true;
    default:
      return false;
  }
}

// The pre-multiplied-sum scalar rank r passes; it differs between ranks on purpose.
template <typename T>
T premulScalar(int rank) {
  return static_cast<T>(rank % 3 + 1);
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
  if constexpr (sizeof(T) == 1) {
    limit = static_cast<int64_t>(std::numeric_limits<T>::max()) / (3 * nranks);
  }
  return limit < 1 ? 1 : limit;
}

// Input element `index` of `rank` for a case with this seed and reduction.
template <typename T>
T inputValue(uint64_t seed, int rank, uint64_t index, Red red, int nranks) {
  uint64_t bits = mixBits(seed, rank, index);
  if (red == Red::Prod) {
    // {1, 2} (and -1 for signed types): |product| <= 2^6 even with many ranks.
    uint64_t pick = bits % (std::is_signed_v<T> ? 3 : 2);
    if (rank >= 6 && pick == 1) pick = 0;
    if (pick == 0) return static_cast<T>(1);
    if (pick == 1) return static_cast<T>(2);
    return static_cast<T>(-1);
  }
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

// The reduction of element `index` over every rank's input, computed from the seeds.
template <typename T>
T expectedReduction(uint64_t seed, uint64_t index, Red red, int nranks) {
  T acc = inputValue<T>(seed, 0, index, red, nranks);
  if (red == Red::PreMul) acc = static_cast<T>(acc * premulScalar<T>(0));
  for (int r = 1; r < nranks; ++r) {
    T v = inputValue<T>(seed, r, index, red, nranks);
    switch (red) {
      case Red::Sum:
      case Red::Avg:
        acc = static_cast<T>(acc + v);
        break;
      case Red::Prod:
        acc = static_cast<T>(acc * v);
        break;
      case Red::Max:
        acc = v > acc ? v : acc;
        break;
      case Red::Min:
        acc = v < acc ? v : acc;
        break;
      case Red::PreMul:
        acc = static_cast<T>(acc + v * premulScalar<T>(r));
        break;
    }
  }
  if (red == Red::Avg) {
    // NCCL's avg: floats multiply by 1/n, integers divide the sum (truncating).
    if constexpr (std::is_floating_point_v<T>) {
      acc = static_cast<T>(acc * static_cast<T>(1.0 / nranks));
    } else {
      acc = static_cast<T>(acc / static_cast<T>(nranks));
    }
  }
  return acc;
}

}  // namespace hc::integ
