// The 16- and 8-bit float types as a checker sees them: a wrapper around the raw bits, decoded and
// encoded with plain double arithmetic written apart from float_types.h (the daemon's and the
// kernels' conversions), so that the expected values of fp16/bf16/fp8 reductions are computed
// independently of the code under test. The integration tests' rank workers and hc-perf's data
// check (bench/check_data.cc) judge results with it; the daemon and the client must not use it,
// or a wrong conversion would agree with itself. Host only (tables, std::ldexp).
//
// Encoding rounds to nearest, ties to even. fp16 and bf16 follow IEEE 754 (overflow gives
// infinity). The fp8 types follow the OCP 8-bit float spec as NVIDIA does: e4m3 has no infinity
// and one NaN per sign (S.1111.111); e5m2 is IEEE-like. Conversions to both fp8 types saturate
// to the largest finite value (e4m3 448, e5m2 57344), which is what the daemon promises; NaN
// stays NaN.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace hc::numerics::reference {

struct MiniFloatFormat {
  int expBits;
  int manBits;
  bool ieeeSpecials;  // the top exponent holds inf/NaN (fp16, bf16, e5m2); false for e4m3
  bool saturates;     // out-of-range finite values become the largest finite value
};

inline constexpr MiniFloatFormat kHalfFormat{5, 10, true, false};
inline constexpr MiniFloatFormat kBf16Format{8, 7, true, false};
inline constexpr MiniFloatFormat kE4M3Format{4, 3, false, true};
inline constexpr MiniFloatFormat kE5M2Format{5, 2, true, true};

constexpr int biasOf(const MiniFloatFormat& f) { return (1 << (f.expBits - 1)) - 1; }

// The value of a code (the sign is the top bit of the 1 + expBits + manBits bits).
inline double decodeMiniFloat(const MiniFloatFormat& f, uint32_t bits) {
  const uint32_t manMask = (1u << f.manBits) - 1;
  const uint32_t expMax = (1u << f.expBits) - 1;
  const bool negative = (bits >> (f.expBits + f.manBits)) & 1;
  const uint32_t exp = (bits >> f.manBits) & expMax;
  const uint32_t man = bits & manMask;
  double magnitude;
  if (f.ieeeSpecials && exp == expMax) {
    magnitude = man == 0 ? std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieeeSpecials && exp == expMax && man == manMask) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<double>(man), 1 - biasOf(f) - f.manBits);
  } else {
    magnitude = std::ldexp(static_cast<double>(man | (1u << f.manBits)),
                           static_cast<int>(exp) - biasOf(f) - f.manBits);
  }
  return negative ? -magnitude : magnitude;
}

// 2^e as a double, for the exponents these formats need (normal doubles), built from its bits:
// encoding runs for every element of every checked case, and ldexp is slow.
constexpr double powerOfTwo(int e) {
  return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
}

// The largest finite value of the format.
constexpr double maxFiniteMiniFloat(const MiniFloatFormat& f) {
  const int topExp = (1 << f.expBits) - (f.ieeeSpecials ? 2 : 1);
  // e4m3: the top exponent's all-ones mantissa is NaN, so its largest mantissa is one less.
  const uint32_t topMan = (1u << (f.manBits + 1)) - (f.ieeeSpecials ? 1 : 2);
  return topMan * powerOfTwo(topExp - biasOf(f) - f.manBits);
}

// The binary exponent of a finite, nonzero double: a = m * 2^e with m in [1, 2).
inline int exponentOf(double a) {
  return static_cast<int>((std::bit_cast<uint64_t>(a) >> 52) & 0x7FF) - 1023;
}

// Rounds v (a float widened to double: exact) to the format, ties to even.
inline uint32_t encodeMiniFloat(const MiniFloatFormat& f, double v) {
  const uint32_t signBit = 1u << (f.expBits + f.manBits);
  const uint32_t expMax = (1u << f.expBits) - 1;
  if (std::isnan(v)) {
    // Any NaN code; checks compare NaN as "is a NaN", never by payload.
    return f.ieeeSpecials ? (expMax << f.manBits) | 1u
                          : (expMax << f.manBits) | ((1u << f.manBits) - 1);
  }
  const uint32_t sign = std::signbit(v) ? signBit : 0;
  const double a = std::fabs(v);
  const double maxFinite = maxFiniteMiniFloat(f);
  auto overflow = [&] {
    return sign | (f.saturates ? encodeMiniFloat(f, maxFinite) : expMax << f.manBits);
  };
  if (std::isinf(a)) return overflow();
  if (a == 0) return sign;
  // Below the smallest normal the spacing stays that of the smallest normal binade (subnormals).
  const int minExp = 1 - biasOf(f);
  const int e = std::max(exponentOf(a), minExp);
  const double quantum = powerOfTwo(e - f.manBits);
  // a / quantum is exact (both dyadic); nearbyint rounds half to even in the default mode.
  const double rounded = std::nearbyint(a / quantum) * quantum;
  if (rounded > maxFinite) return overflow();
  if (rounded == 0) return sign;
  // Rounding may have carried into the next binade: take the fields from the rounded value.
  const int re = exponentOf(rounded);
  if (re < minExp) {  // subnormal: exponent field 0
    return sign | static_cast<uint32_t>(rounded / powerOfTwo(minExp - f.manBits));
  }
  const uint32_t man =
      static_cast<uint32_t>(rounded / powerOfTwo(re - f.manBits)) - (1u << f.manBits);
  return sign | (static_cast<uint32_t>(re + biasOf(f)) << f.manBits) | man;
}

// Every code's value, computed once per format: the verification of a million-element case
// decodes several million elements.
template <const MiniFloatFormat& kFormat, int kBits>
const float* decodeTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << kBits);
    for (uint32_t c = 0; c < t.size(); ++c) t[c] = static_cast<float>(decodeMiniFloat(kFormat, c));
    return t;
  }();
  return table.data();
}

// A narrow float element: the raw bits, compared bitwise except that any two NaNs are equal.
template <typename Bits, const MiniFloatFormat& kFormat>
struct NarrowFloat {
  Bits bits;

  static constexpr const MiniFloatFormat& format() { return kFormat; }
  static NarrowFloat fromBits(uint32_t b) { return NarrowFloat{static_cast<Bits>(b)}; }
  static NarrowFloat fromDouble(double v) { return fromBits(encodeMiniFloat(kFormat, v)); }
  // Every value a check puts in is a float first; the daemon rounds fp32 accumulators too.
  static NarrowFloat fromFloat(float v) { return fromDouble(static_cast<double>(v)); }
  float toFloat() const { return decodeTable<kFormat, 8 * sizeof(Bits)>()[bits]; }
  bool isNaN() const { return std::isnan(toFloat()); }

  friend bool operator==(NarrowFloat a, NarrowFloat b) {
    return a.bits == b.bits || (a.isNaN() && b.isNaN());
  }
};

using Half = NarrowFloat<uint16_t, kHalfFormat>;
using BFloat16 = NarrowFloat<uint16_t, kBf16Format>;
using Fp8E4M3 = NarrowFloat<uint8_t, kE4M3Format>;
using Fp8E5M2 = NarrowFloat<uint8_t, kE5M2Format>;

template <typename T>
inline constexpr bool kIsNarrowFloat = false;
template <typename Bits, const MiniFloatFormat& kFormat>
inline constexpr bool kIsNarrowFloat<NarrowFloat<Bits, kFormat>> = true;

// Significand bits including the implicit one: the exactness budget of sums in the type.
template <typename T>
constexpr int significandBits() {
  if constexpr (kIsNarrowFloat<T>) {
    return T::format().manBits + 1;
  } else {
    return std::numeric_limits<T>::digits;
  }
}

}  // namespace hc::numerics::reference
