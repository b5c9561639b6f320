// The reference codec that checks judge daemon results by
// (common/numerics/narrow_float_reference.h) must be right first: its conversions are checked
// against known encodings, against a brute-force nearest-code search, and by round trips of every
// code.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/numerics/narrow_float_reference.h"

namespace hc::numerics::reference {
namespace {

TEST(NarrowFloatTest, KnownEncodings) {
  EXPECT_EQ(Half::fromFloat(1.0f).bits, 0x3C00);
  EXPECT_EQ(Half::fromFloat(-2.0f).bits, 0xC000);
  EXPECT_EQ(Half::fromFloat(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(Half::fromFloat(65520.0f).bits, 0x7C00);       // the tie above the max rounds to inf
  EXPECT_EQ(Half::fromFloat(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(BFloat16::fromFloat(1.0f).bits, 0x3F80);
  EXPECT_EQ(BFloat16::fromFloat(-0.5f).bits, 0xBF00);
  EXPECT_EQ(BFloat16::fromFloat(1.00390625f).bits, 0x3F80);  // tie to even (down)
  EXPECT_EQ(BFloat16::fromFloat(1.01171875f).bits, 0x3F82);  // tie to even (up)
  EXPECT_EQ(Fp8E4M3::fromFloat(1.0f).bits, 0x38);
  EXPECT_EQ(Fp8E4M3::fromFloat(448.0f).bits, 0x7E);
  EXPECT_EQ(Fp8E4M3::fromFloat(1000.0f).bits, 0x7E);  // saturates
  EXPECT_EQ(Fp8E4M3::fromFloat(-1e30f).bits, 0xFE);
  EXPECT_EQ(Fp8E4M3::fromFloat(0.001953125f).bits, 0x01);  // 2^-9, smallest subnormal
  EXPECT_EQ(Fp8E5M2::fromFloat(1.0f).bits, 0x3C);
  EXPECT_EQ(Fp8E5M2::fromFloat(57344.0f).bits, 0x7B);
  EXPECT_EQ(Fp8E5M2::fromFloat(1e9f).bits, 0x7B);  // saturates instead of inf
  EXPECT_EQ(Fp8E5M2::fromFloat(std::numeric_limits<float>::infinity()).bits, 0x7B);
  EXPECT_TRUE(Fp8E4M3::fromFloat(std::nanf("")).isNaN());
  EXPECT_TRUE(Fp8E5M2::fromFloat(std::nanf("")).isNaN());
  EXPECT_TRUE(Half::fromFloat(std::nanf("")).isNaN());
  EXPECT_EQ(Fp8E4M3::fromBits(0x7F).isNaN(), true);
  EXPECT_EQ(Fp8E4M3::fromBits(0x7E).toFloat(), 448.0f);
  EXPECT_EQ(Fp8E5M2::fromBits(0x7C).toFloat(), std::numeric_limits<float>::infinity());
}

// Nearest code by search, ties to the even code, saturating where the format does.
template <typename T>
uint32_t nearestBySearch(double v) {
  const uint32_t codes = 1u << (8 * sizeof(T::bits));
  uint32_t best = 0;
  double bestErr = std::numeric_limits<double>::infinity();
  for (uint32_t c = 0; c < codes; ++c) {
    double d = decodeMiniFloat(T::format(), c);
    if (std::isnan(d) || std::isinf(d) || std::signbit(d) != std::signbit(v)) continue;
    double err = std::fabs(d - v);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) {
      best = c;
      bestErr = err;
    }
  }
  return best;
}

template <typename T>
void checkAgainstSearch(int values) {
  const double maxFinite = maxFiniteMiniFloat(T::format());
  for (int i = 0; i < values; ++i) {
    // Magnitudes across the whole range, subnormals included; halfway points on purpose.
    double v = std::ldexp(1.0 + (i % 97) / 97.0, (i % 40) - 24);
    if (i % 7 == 0) v = decodeMiniFloat(T::format(), static_cast<uint32_t>(i) & 0x7F) * 1.0625;
    if (i % 2 == 1) v = -v;
    v = static_cast<float>(v);
    if (std::isnan(v) || std::isinf(v)) continue;
    if (std::fabs(v) > maxFinite && !T::format().saturates) continue;  // IEEE: inf, checked above
    SCOPED_TRACE("value " + std::to_string(v));
    EXPECT_EQ(T::fromDouble(v).bits, nearestBySearch<T>(v));
  }
}

TEST(NarrowFloatTest, EncodingIsTheNearestCodeTiesToEven) {
  checkAgainstSearch<Fp8E4M3>(4000);
  checkAgainstSearch<Fp8E5M2>(4000);
  checkAgainstSearch<Half>(300);  // 65536 codes searched per value
}

template <typename T>
void checkRoundTrips() {
  for (uint32_t c = 0; c < (1u << (8 * sizeof(T::bits))); ++c) {
    T v = T::fromBits(c);
    if (v.isNaN()) continue;
    // Infinity exists in some saturating formats (e5m2) but converts to the largest finite value.
    if (T::format().saturates && std::isinf(v.toFloat())) continue;
    ASSERT_EQ(T::fromFloat(v.toFloat()).bits, c) << "code " << c;  // -0 included
  }
}

TEST(NarrowFloatTest, EveryNonNaNCodeRoundTrips) {
  checkRoundTrips<Fp8E4M3>();
  checkRoundTrips<Fp8E5M2>();
  checkRoundTrips<Half>();
  checkRoundTrips<BFloat16>();
}

}  // namespace
}  // namespace hc::numerics::reference
