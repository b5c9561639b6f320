#include "bench/check_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/numerics/narrow_float_reference.h"

namespace hc::bench {
namespace {

// Narrow floats are checked with the reference codec, not the conversions under test.
namespace ref = numerics::reference;

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The value range of one (dtype, redop, nranks), derived once per call.
struct Generator {
  uint64_t seed;
  hc_redop_t redop;
  int64_t lo = 0, hi = 0;  // inputs of sum/avg/max/min/copies lie in [lo, hi]
  int maxDoublings = 0;    // prod: ranks below this may contribute a factor 2
  int contributors = 0;    // ranks from this one on contribute 0 (sums of narrow floats)
  bool isSigned = false;

  Generator(const DataSpec& s, int64_t typeMax, bool isSignedType, int productBits)
      : seed(s.seed), redop(s.redop), contributors(s.nranks), isSigned(isSignedType) {
    if (redop == HC_SUM || redop == HC_AVG) {
      // n inputs of magnitude hi must sum within the type (int8 with 64 ranks: hi = 1); when
      // even hi = 1 is too much (fp8 with many ranks), only the first ranks contribute.
      hi = std::max<int64_t>(1, std::min<int64_t>(3, typeMax / s.nranks));
      contributors = static_cast<int>(std::min<int64_t>(s.nranks, typeMax / hi));
      // avg of integers divides after the sum, which truncates: keep sums non-negative so
      // truncation and flooring agree.
      lo = isSigned && redop == HC_SUM ? -hi : 0;
    } else {
      hi = std::min<int64_t>(typeMax / 2, 1000);  // leaves the sentinel outside the range
      lo = isSigned ? -hi : 0;
    }
    maxDoublings = productBits;
  }

  int64_t value(int rank, size_t index) const {
    if (rank >= contributors) return 0;
    uint64_t h = mix(seed ^ (uint64_t(rank) + 1) * 0x9e3779b97f4a7c15ull ^
                     (uint64_t(index) + 1) * 0xd6e8feb86659fd93ull);
    if (redop == HC_PROD) {
      int64_t magnitude = (rank < maxDoublings && (h & 3) == 0) ? 2 : 1;
      return isSigned && ((h >> 2) & 1) != 0 ? -magnitude : magnitude;
    }
    // Multiply-shift range reduction: a division per element would dominate the checked runs.
    return lo + static_cast<int64_t>(((h >> 32) * static_cast<uint64_t>(hi - lo + 1)) >> 32);
  }

  // The reduction over ranks, exact in int64 by the ranges above; avg returns the sum.
  int64_t reduced(int nranks, size_t index) const {
    int64_t acc = value(0, index);
    for (int r = 1; r < nranks; ++r) {
      int64_t v = value(r, index);
      switch (redop) {
        case HC_PROD:
          acc *= v;
          break;
        case HC_MAX:
          acc = std::max(acc, v);
          break;
        case HC_MIN:
          acc = std::min(acc, v);
          break;
        default:
          acc += v;
          break;
      }
    }
    return acc;
  }
};

template <typename T>
constexpr bool kNarrow = ref::kIsNarrowFloat<T>;

template <typename T>
Generator generatorFor(const DataSpec& s) {
  if constexpr (kNarrow<T>) {
    // Integers up to 2^significand are exact; products of 2s up to the largest power of two.
    const int64_t typeMax = int64_t{1} << ref::significandBits<T>();
    const int maxExp =
        static_cast<int>(std::floor(std::log2(ref::maxFiniteMiniFloat(T::format()))));
    return Generator(s, typeMax, true, std::min(62, maxExp));
  } else {
    using L = std::numeric_limits<T>;
    int64_t typeMax = std::is_floating_point_v<T>
                          ? (int64_t{1} << 53)
                          : static_cast<int64_t>(std::min<uint64_t>(L::max(), uint64_t{1} << 62));
    // Products of powers of two must fit the type and the int64 reference.
    int bits = std::is_floating_point_v<T> ? 62 : std::min(62, L::digits - 1);
    return Generator(s, typeMax, L::is_signed, bits);
  }
}

template <typename T>
T fromInteger(int64_t v) {
  if constexpr (kNarrow<T>) {
    return T::fromFloat(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void fillTyped(const DataSpec& s, int rank, size_t first, size_t n, void* buf) {
  Generator g = generatorFor<T>(s);
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = fromInteger<T>(g.value(rank, first + i));
}

template <typename T>
bool matches(T got, int64_t expected, bool average, int nranks) {
  if (average) {
    if constexpr (kNarrow<T>) {
      // The fp32 sum (exact) times (float)(1/n), rounded once to T.
      float want = static_cast<float>(expected) * static_cast<float>(1.0 / nranks);
      return got == T::fromFloat(want);
    } else if constexpr (std::is_floating_point_v<T>) {
      double want = static_cast<double>(expected) / nranks;
      double tol = 8 * std::numeric_limits<T>::epsilon() * std::max(1.0, std::fabs(want));
      return std::fabs(static_cast<double>(got) - want) <= tol;
    } else {
      return got == static_cast<T>(expected / nranks);
    }
  }
  return got == fromInteger<T>(expected);
}

template <typename T>
size_t wrongReducedTyped(const DataSpec& s, size_t first, size_t n, const void* buf) {
  Generator g = generatorFor<T>(s);
  const T* p = static_cast<const T*>(buf);
  const bool average = s.redop == HC_AVG;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    wrong += !matches(p[i], g.reduced(s.nranks, first + i), average, s.nranks);
  }
  return wrong;
}

template <typename T>
size_t wrongCopiedTyped(const DataSpec& s, int src, size_t first, size_t n, const void* buf) {
  Generator g = generatorFor<T>(s);
  const T* p = static_cast<const T*>(buf);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += !(p[i] == fromInteger<T>(g.value(src, first + i)));
  return wrong;
}

template <typename F>
auto dispatch(hc_dtype_t dtype, F&& f) {
  switch (dtype) {
    case HC_INT8:
      return f(int8_t{});
    case HC_UINT8:
      return f(uint8_t{});
    case HC_INT32:
      return f(int32_t{});
    case HC_UINT32:
      return f(uint32_t{});
    case HC_INT64:
      return f(int64_t{});
    case HC_UINT64:
      return f(uint64_t{});
    case HC_FLOAT64:
      return f(double{});
    case HC_FLOAT16:
      return f(ref::Half{});
    case HC_BFLOAT16:
      return f(ref::BFloat16{});
    case HC_FLOAT8E4M3:
      return f(ref::Fp8E4M3{});
    case HC_FLOAT8E5M2:
      return f(ref::Fp8E5M2{});
    default:
      return f(float{});
  }
}

}  // namespace

void fillInput(const DataSpec& spec, int rank, size_t first, size_t n, void* buf) {
  dispatch(spec.dtype, [&](auto t) { fillTyped<decltype(t)>(spec, rank, first, n, buf); });
}

void fillSentinel(hc_dtype_t dtype, size_t n, void* buf) {
  // int8 123 and uint8 238 lie above every checked input range (Generator); the wider types get
  // values in the billions or beyond; fp16 0x7b7b is 61280, e4m3 0x7b 352 and e5m2 0x7b 57344,
  // all beyond the narrow floats' input ranges.
  std::memset(buf, dtype == HC_UINT8 ? 0xee : 0x7b, n * dtypeSize(dtype));
}

size_t countWrongReduced(const DataSpec& spec, size_t first, size_t n, const void* buf) {
  return dispatch(spec.dtype,
                  [&](auto t) { return wrongReducedTyped<decltype(t)>(spec, first, n, buf); });
}

size_t countWrongCopied(const DataSpec& spec, int src, size_t first, size_t n, const void* buf) {
  return dispatch(spec.dtype,
                  [&](auto t) { return wrongCopiedTyped<decltype(t)>(spec, src, first, n, buf); });
}

}  // namespace hc::bench
