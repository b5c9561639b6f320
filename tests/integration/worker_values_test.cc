// The test side's own arithmetic: the narrow-float conversions and the seeded values must be
// right before any daemon result is judged by them. Conversions are checked against known
// encodings and against a brute-force nearest-code search; the inputs against the exactness
// promise of worker_values.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/integration/narrow_float.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {
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

// The promise the matrix relies on: sums, pre-multiplied sums and products of the seeded inputs
// accumulate exactly in fp32 (so the daemon's order cannot matter), and for the rank counts of
// the matrix (up to 4) the result is representable in the narrow type. With more ranks the one
// rounding at the end may be inexact, and the expected value is that rounding.
template <typename T>
void checkExactness() {
  for (int nranks = 1; nranks <= 8; ++nranks) {
    for (Red red : {Red::Sum, Red::PreMulBuffer, Red::Prod}) {
      for (uint64_t i = 0; i < 2000; ++i) {
        double exact = 0;
        float accumulated = 0;
        for (int r = 0; r < nranks; ++r) {
          float x = inputValue<T>(9, r, i, red, nranks).toFloat();
          float s = red == Red::PreMulBuffer ? premulScalar<T>(r).toFloat() : 1.0f;
          exact = red == Red::Prod ? (r == 0 ? x : exact * x) : exact + double{x} * s;
          accumulated = red == Red::Prod ? (r == 0 ? x : accumulated * x) : accumulated + x * s;
        }
        SCOPED_TRACE("nranks " + std::to_string(nranks) + " red " + std::string(redName(red)) +
                     " index " + std::to_string(i));
        ASSERT_EQ(double{accumulated}, exact) << "the fp32 accumulation is inexact";
        T got = expectedReduction<T>(9, i, red, nranks);
        ASSERT_EQ(got.bits, T::fromDouble(exact).bits);
        if (nranks <= 4) {
          ASSERT_EQ(double{got.toFloat()}, exact) << "not representable";
        }
      }
    }
  }
}

TEST(WorkerValuesTest, NarrowFloatReductionsOfTheSeededInputsAreExact) {
  checkExactness<Half>();
  checkExactness<BFloat16>();
  checkExactness<Fp8E4M3>();
  checkExactness<Fp8E5M2>();
}

TEST(WorkerValuesTest, MaxAndMinInputsAreFiniteAndNeverNegativeZero) {
  for (uint64_t i = 0; i < 5000; ++i) {
    Fp8E5M2 e = inputValue<Fp8E5M2>(3, 1, i, Red::Max, 4);
    ASSERT_FALSE(e.isNaN() || std::isinf(e.toFloat()) || e.bits == 0x80) << int(e.bits);
    Half h = inputValue<Half>(3, 1, i, Red::Min, 4);
    ASSERT_FALSE(h.isNaN() || std::isinf(h.toFloat()) || h.bits == 0x8000) << h.bits;
  }
}

}  // namespace
}  // namespace hc::integ
