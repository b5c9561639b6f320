// A reference for the narrow float formats (fp16, bf16, fp8 e4m3, fp8 e5m2) that shares nothing
// with common/numerics/float_types.h, for the numerics and reduction tests: values are decoded
// from the sign, exponent and mantissa fields with std::ldexp, and a double is rounded by
// searching the sorted list of every finite value of the format for its neighbours, ties going
// to the neighbour with the even encoding. The overflow rules are written out as the formats'
// specifications state them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace hc::testing {

struct FormatSpec {
  const char* name;
  int exponentBits;
  int mantissaBits;
  bool ieeeSpecials;  // all-ones exponent = infinity/NaN; otherwise only all-ones bits are NaN
  bool saturates;     // overflow and infinity give the largest finite value

  int width() const { return 1 + exponentBits + mantissaBits; }
  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  uint32_t encodings() const { return 1u << width(); }
  uint32_t signBit() const { return 1u << (width() - 1); }
};

inline constexpr FormatSpec kFp16Spec{"fp16", 5, 10, true, false};
inline constexpr FormatSpec kBf16Spec{"bf16", 8, 7, true, false};
inline constexpr FormatSpec kE4M3Spec{"fp8_e4m3", 4, 3, false, true};
inline constexpr FormatSpec kE5M2Spec{"fp8_e5m2", 5, 2, true, true};

// The value of an encoding: +-0, subnormal, normal, +-infinity or NaN.
inline double referenceDecode(const FormatSpec& f, uint32_t bits) {
  const bool negative = (bits & f.signBit()) != 0;
  const uint32_t exponent = (bits >> f.mantissaBits) & ((1u << f.exponentBits) - 1);
  const uint32_t mantissa = bits & ((1u << f.mantissaBits) - 1);
  const uint32_t allOnesExponent = (1u << f.exponentBits) - 1;
  const uint32_t allOnesMantissa = (1u << f.mantissaBits) - 1;
  double magnitude;
  if (f.ieeeSpecials && exponent == allOnesExponent) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieeeSpecials && exponent == allOnesExponent && mantissa == allOnesMantissa) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - f.bias() - f.mantissaBits);
  } else {
    magnitude = std::ldexp(static_cast<double>((1u << f.mantissaBits) + mantissa),
                           static_cast<int>(exponent) - f.bias() - f.mantissaBits);
  }
  return negative ? -magnitude : magnitude;
}

inline bool isNanEncoding(const FormatSpec& f, uint32_t bits) {
  return std::isnan(referenceDecode(f, bits));
}

// Rounds doubles to the nearest encoding of a format.
class ReferenceRounder {
 public:
  // Returned for a NaN input: any NaN encoding is right.
  static constexpr uint32_t kAnyNan = 0xFFFFFFFFu;

  explicit ReferenceRounder(const FormatSpec& f) : f_(f) {
    for (uint32_t bits = 0; bits < f.signBit(); ++bits) {
      const double v = referenceDecode(f, bits);
      if (std::isfinite(v)) finite_.emplace_back(v, bits);
    }
    std::sort(finite_.begin(), finite_.end());
    for (uint32_t bits = 0; bits < f.signBit(); ++bits) {
      if (std::isinf(referenceDecode(f, bits))) infinityBits_ = bits;
    }
  }

  const FormatSpec& format() const { return f_; }
  double maxFinite() const { return finite_.back().first; }
  uint32_t maxFiniteBits() const { return finite_.back().second; }
  // Every finite non-negative value with its encoding, ascending.
  const std::vector<std::pair<double, uint32_t>>& finiteValues() const { return finite_; }

  uint32_t round(double x) const {
    if (std::isnan(x)) return kAnyNan;
    const uint32_t sign = std::signbit(x) ? f_.signBit() : 0;
    return sign | roundMagnitude(std::fabs(x));
  }

 private:
  uint32_t roundMagnitude(double a) const {
    if (a > maxFinite()) {
      // Saturating formats: everything beyond, infinity included, is the largest finite value.
      // IEEE: round as if the next binade continued, so from maxFinite + ulp/2 on (the tie goes to
      // the even side, which is infinity since the largest finite mantissa is all ones).
      if (f_.saturates) return maxFiniteBits();
      const double ulp = maxFinite() - finite_[finite_.size() - 2].first;
      return a >= maxFinite() + ulp / 2 ? infinityBits_ : maxFiniteBits();
    }
    // The first value >= a; a <= maxFinite, so it exists.
    auto hi = std::lower_bound(finite_.begin(), finite_.end(), std::make_pair(a, uint32_t{0}),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (hi->first == a) return hi->second;
    auto lo = hi - 1;  // a > 0 = finite_[0], so a lower neighbour exists
    // Neighbours have at most 12 significant bits, so their midpoint is exact in double.
    const double mid = (lo->first + hi->first) / 2;
    if (a < mid) return lo->second;
    if (a > mid) return hi->second;
    return (lo->second & 1u) == 0 ? lo->second : hi->second;
  }

  FormatSpec f_;
  std::vector<std::pair<double, uint32_t>> finite_;
  uint32_t infinityBits_ = 0;
};

}  // namespace hc::testing
