// common/numerics/float_types.h against the independent reference of float_reference.h: every
// encoding of every format decodes exactly and round-trips; fromFloat rounds every halfway point
// between neighbouring values (and the floats just beside it) and a million random floats as the
// reference does; and hand-derived edge cases, each with its derivation, pin the rules down
// without trusting either implementation.
#include "common/numerics/float_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/common/float_reference.h"

namespace hc::numerics {
namespace {

using hc::testing::FormatSpec;
using hc::testing::ReferenceRounder;

// The conversions are usable in constant expressions (and so on devices without a runtime).
static_assert(Fp16::fromFloat(1.0f) == 0x3C00 && Fp16::toFloat(0x3C00) == 1.0f);
static_assert(Bf16::fromFloat(-2.0f) == 0xC000 && Bf16::toFloat(0xC000) == -2.0f);
static_assert(Fp8E4M3::fromFloat(448.0f) == 0x7E && Fp8E4M3::toFloat(0x7E) == 448.0f);
static_assert(Fp8E5M2::fromFloat(57344.0f) == 0x7B && Fp8E5M2::toFloat(0x7B) == 57344.0f);

float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Both the value and the sign of a zero; NaN equals NaN.
bool sameValue(double want, float got) {
  if (std::isnan(want)) return std::isnan(got);
  return want == static_cast<double>(got) && std::signbit(want) == std::signbit(got);
}

template <typename Format>
struct FormatTraits;
template <>
struct FormatTraits<Fp16> {
  static constexpr const FormatSpec& kSpec = hc::testing::kFp16Spec;
};
template <>
struct FormatTraits<Bf16> {
  static constexpr const FormatSpec& kSpec = hc::testing::kBf16Spec;
};
template <>
struct FormatTraits<Fp8E4M3> {
  static constexpr const FormatSpec& kSpec = hc::testing::kE4M3Spec;
};
template <>
struct FormatTraits<Fp8E5M2> {
  static constexpr const FormatSpec& kSpec = hc::testing::kE5M2Spec;
};

template <typename Format>
class NumericsTest : public ::testing::Test {
 protected:
  using Bits = typename Format::Bits;
  static const FormatSpec& spec() { return FormatTraits<Format>::kSpec; }

  // Counts fromFloat results that differ from the reference (any NaN encoding matches a NaN);
  // reports the first few.
  static size_t checkFromFloat(const ReferenceRounder& ref, float x, size_t* reported) {
    const uint32_t want = ref.round(x);
    const uint32_t got = Format::fromFloat(x);
    const bool ok =
        want == ReferenceRounder::kAnyNan ? hc::testing::isNanEncoding(spec(), got) : got == want;
    if (!ok && (*reported)++ < 10) {
      ADD_FAILURE() << spec().name << " fromFloat(" << std::hexfloat << x << " = "
                    << hex(bitsOfFloat(x)) << ") = " << hex(got) << ", want " << hex(want);
    }
    return ok ? 0 : 1;
  }
};

using Formats = ::testing::Types<Fp16, Bf16, Fp8E4M3, Fp8E5M2>;
class FormatNames {
 public:
  template <typename Format>
  static std::string GetName(int) {
    return FormatTraits<Format>::kSpec.name;
  }
};
TYPED_TEST_SUITE(NumericsTest, Formats, FormatNames);

TYPED_TEST(NumericsTest, ToFloatIsExactForEveryEncoding) {
  const FormatSpec& f = this->spec();
  size_t wrong = 0;
  for (uint32_t bits = 0; bits < f.encodings(); ++bits) {
    const double want = hc::testing::referenceDecode(f, bits);
    const float got = TypeParam::toFloat(static_cast<typename TypeParam::Bits>(bits));
    if (!sameValue(want, got) && wrong++ < 10) {
      ADD_FAILURE() << f.name << " toFloat(" << hex(bits) << ") = " << std::hexfloat << got
                    << ", want " << want;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// fromFloat(toFloat(x)) == x for every encoding but NaN (any NaN encoding) and, for the
// saturating fp8 e5m2, the infinities (the largest finite value of that sign).
TYPED_TEST(NumericsTest, EveryEncodingRoundTrips) {
  const FormatSpec& f = this->spec();
  size_t wrong = 0;
  size_t nans = 0;
  for (uint32_t bits = 0; bits < f.encodings(); ++bits) {
    const double value = hc::testing::referenceDecode(f, bits);
    const uint32_t back =
        TypeParam::fromFloat(TypeParam::toFloat(static_cast<typename TypeParam::Bits>(bits)));
    uint32_t want = bits;
    if (std::isinf(value) && f.saturates) want = (bits & f.signBit()) | TypeParam::kMaxFiniteBits;
    const bool ok = std::isnan(value) ? hc::testing::isNanEncoding(f, back) : back == want;
    nans += std::isnan(value);
    if (!ok && wrong++ < 10) {
      ADD_FAILURE() << f.name << " " << hex(bits) << " came back as " << hex(back);
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(nans, 0u);  // the NaN branch ran
}

// Every midpoint between two neighbouring finite values (a tie: to the even encoding), the
// floats just below and above it, and the neighbours themselves, with both signs. The midpoints
// have at most 12 significant bits, so they are floats.
TYPED_TEST(NumericsTest, FromFloatRoundsEveryHalfwayPointToNearestEven) {
  const ReferenceRounder ref(this->spec());
  const auto& values = ref.finiteValues();
  size_t wrong = 0;
  size_t reported = 0;
  size_t ties = 0;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double midDouble = (values[i].first + values[i + 1].first) / 2;
    const float mid = static_cast<float>(midDouble);
    ASSERT_EQ(static_cast<double>(mid), midDouble);
    const float inf = std::numeric_limits<float>::infinity();
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, inf),
                    static_cast<float>(values[i].first)}) {
      wrong += this->checkFromFloat(ref, x, &reported);
      wrong += this->checkFromFloat(ref, -x, &reported);
    }
    // Independently of the reference: the tie lands on the neighbour with the even encoding.
    const uint32_t even = (values[i].second & 1u) == 0 ? values[i].second : values[i + 1].second;
    EXPECT_EQ(TypeParam::fromFloat(mid), even) << hex(bitsOfFloat(mid));
    ++ties;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(ties, values.size() - 1);
}

// Random bit patterns cover every fp32 class (subnormal, normal, infinity, NaN) at every
// exponent; the log-uniform magnitudes concentrate on this format's range.
TYPED_TEST(NumericsTest, FromFloatMatchesReferenceOnRandomFloats) {
  const ReferenceRounder ref(this->spec());
  std::mt19937_64 rng(12345);
  size_t wrong = 0;
  size_t reported = 0;
  const double top = std::log2(ref.maxFinite()) + 2;
  std::uniform_real_distribution<double> exponent(-this->spec().mantissaBits - top - 4, top);
  for (int i = 0; i < 300000; ++i) {
    wrong += this->checkFromFloat(ref, floatFromBits(static_cast<uint32_t>(rng())), &reported);
    const float nearRange = static_cast<float>(std::exp2(exponent(rng)));
    wrong += this->checkFromFloat(ref, (rng() & 1) ? -nearRange : nearRange, &reported);
  }
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu,
                     0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0x7FC00000u, 0xFFC00000u,
                     0x7FFFFFFFu, 0xFFBFFFFFu}) {
    wrong += this->checkFromFloat(ref, floatFromBits(u), &reported);
  }
  EXPECT_EQ(wrong, 0u);
}

TYPED_TEST(NumericsTest, KeepsTheSignOfZeroAndOfValuesRoundingToZero) {
  const uint32_t sign = this->spec().signBit();
  EXPECT_EQ(TypeParam::fromFloat(0.0f), 0u);
  EXPECT_EQ(TypeParam::fromFloat(-0.0f), sign);
  EXPECT_EQ(TypeParam::fromFloat(-std::numeric_limits<float>::denorm_min()), sign);
  EXPECT_TRUE(std::signbit(TypeParam::toFloat(static_cast<typename TypeParam::Bits>(sign))));
  EXPECT_EQ(TypeParam::toFloat(static_cast<typename TypeParam::Bits>(sign)), 0.0f);
}

TYPED_TEST(NumericsTest, NanStaysNanWithItsSign) {
  const FormatSpec& f = this->spec();
  for (uint32_t u : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA00000u, 0x7F802000u}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t got = TypeParam::fromFloat(floatFromBits(u | sign));
      EXPECT_TRUE(hc::testing::isNanEncoding(f, got)) << hex(u | sign) << " -> " << hex(got);
      EXPECT_EQ((got & f.signBit()) != 0, sign != 0) << hex(u | sign);
    }
  }
  EXPECT_TRUE(hc::testing::isNanEncoding(f, TypeParam::kQuietNanBits));
  EXPECT_TRUE(std::isnan(TypeParam::toFloat(TypeParam::kQuietNanBits)));
}

TYPED_TEST(NumericsTest, OverflowGivesInfinityOrSaturates) {
  const FormatSpec& f = this->spec();
  const uint32_t max = TypeParam::kMaxFiniteBits;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(static_cast<double>(TypeParam::toFloat(TypeParam::kMaxFiniteBits)),
            ReferenceRounder(f).maxFinite());
  const float beyond = static_cast<float>(ReferenceRounder(f).maxFinite() * 1.5);  // bf16: inf
  for (float x : {inf, std::numeric_limits<float>::max(), beyond}) {
    const uint32_t want = f.saturates ? max : TypeParam::kInfinityBits;
    EXPECT_EQ(TypeParam::fromFloat(x), want) << x;
    EXPECT_EQ(TypeParam::fromFloat(-x), want | f.signBit()) << -x;
  }
}

// Hand-derived cases: {input, expected encoding}, each with how it follows from the format.
struct EdgeCase {
  float input;
  uint32_t want;
  const char* why;
};

template <typename Format>
void expectEdgeCases(const std::vector<EdgeCase>& cases) {
  const ReferenceRounder ref(FormatTraits<Format>::kSpec);
  for (const EdgeCase& c : cases) {
    EXPECT_EQ(Format::fromFloat(c.input), c.want) << std::hexfloat << c.input << ": " << c.why;
    EXPECT_EQ(ref.round(c.input), c.want) << "reference disagrees: " << c.why;
  }
}

TEST(NumericsEdgeTest, Fp16) {
  expectEdgeCases<Fp16>({
      {1.0f, 0x3C00, "exponent 15 + 0, mantissa 0"},
      {0x1.002p0f, 0x3C00, "1 + 2^-11 is halfway between 1 (0x3C00) and 1 + 2^-10: even"},
      {0x1.006p0f, 0x3C02, "1 + 3*2^-11 is halfway between 0x3C01 and 0x3C02: even"},
      {0x1.002002p0f, 0x3C01, "just above the first halfway point"},
      {0x1.001ffep0f, 0x3C00, "just below it"},
      {65504.0f, 0x7BFF, "(2 - 2^-10) * 2^15, the largest finite value"},
      {65519.99609375f, 0x7BFF, "just below 65520, halfway to 2^16"},
      {65520.0f, 0x7C00, "halfway between 0x7BFF (odd) and 2^16 = infinity (even)"},
      {-65520.0f, 0xFC00, "the same, negative"},
      {0x1p-24f, 0x0001, "2^-24, the smallest subnormal"},
      {0x1p-25f, 0x0000, "half of it: a tie between 0 (even) and 0x0001"},
      {0x1.000002p-25f, 0x0001, "just above half of it"},
      {-0x1p-25f, 0x8000, "the tie rounds to -0"},
      {0x1.8p-24f, 0x0002, "1.5 * 2^-24 is halfway between 0x0001 and 0x0002: even"},
      {0x1.ffcp-15f, 0x0400, "1023.5 * 2^-24: halfway from 0x03FF to the smallest normal"},
      {0x1.ff8p-15f, 0x03FF, "1023 * 2^-24, the largest subnormal"},
  });
}

TEST(NumericsEdgeTest, Bf16) {
  expectEdgeCases<Bf16>({
      {1.0f, 0x3F80, "the top 16 bits of fp32 1.0"},
      {0x1.01p0f, 0x3F80, "1 + 2^-8 is halfway between 1 and 1 + 2^-7: even"},
      {0x1.03p0f, 0x3F82, "1 + 3*2^-8 is halfway between 0x3F81 and 0x3F82: even"},
      {0x1.010002p0f, 0x3F81, "just above the first halfway point"},
      {0x1.fep127f, 0x7F7F, "(2 - 2^-7) * 2^127, the largest finite value"},
      {0x1.ffp127f, 0x7F80, "halfway between 0x7F7F (odd) and 2^128 = infinity (even)"},
      {0x1.fefffep127f, 0x7F7F, "just below that"},
      {floatFromBits(0x00010000), 0x0001, "2^-133, the smallest subnormal"},
      {floatFromBits(0x00008000), 0x0000, "half of it: a tie, to 0 (even)"},
      {floatFromBits(0x00008001), 0x0001, "just above half of it"},
      {floatFromBits(0x00018000), 0x0002, "1.5 * 2^-133: halfway between 0x0001 and 0x0002"},
      {floatFromBits(0x00000001), 0x0000, "2^-149, far below half a unit"},
      {floatFromBits(0x807F8000), 0x8080, "-(2^-126 - 2^-134): a tie, up to -2^-126 (even)"},
  });
}

TEST(NumericsEdgeTest, Fp8E4M3) {
  expectEdgeCases<Fp8E4M3>({
      {1.0f, 0x38, "exponent 7 + 0, mantissa 0"},
      {1.0625f, 0x38, "1 + 2^-4 is halfway between 1 and 1.125: even"},
      {1.1875f, 0x3A, "halfway between 1.125 (0x39) and 1.25 (0x3A): even"},
      {448.0f, 0x7E, "1.75 * 2^8, the largest finite value (0x7F is NaN)"},
      {464.0f, 0x7E, "halfway to 480, which would be NaN's encoding: saturates"},
      {1e6f, 0x7E, "saturates"},
      {-1e6f, 0xFE, "saturates, negative"},
      {0x1p-9f, 0x01, "2^-9, the smallest subnormal"},
      {0x1p-10f, 0x00, "half of it: a tie, to 0 (even)"},
      {0x1.8p-10f, 0x01, "0.75 * 2^-9 rounds up"},
      {0x1.8p-9f, 0x02, "1.5 * 2^-9 is halfway between 0x01 and 0x02: even"},
      {0x1.ep-7f, 0x08, "7.5 * 2^-9: halfway from 0x07 (odd) to the smallest normal 2^-6"},
  });
}

TEST(NumericsEdgeTest, Fp8E5M2) {
  expectEdgeCases<Fp8E5M2>({
      {1.0f, 0x3C, "exponent 15 + 0, mantissa 0"},
      {1.125f, 0x3C, "1 + 2^-3 is halfway between 1 and 1.25: even"},
      {1.375f, 0x3E, "halfway between 1.25 (0x3D) and 1.5 (0x3E): even"},
      {57344.0f, 0x7B, "1.75 * 2^15, the largest finite value"},
      {61440.0f, 0x7B, "halfway to 2^16 (infinity for IEEE): saturates"},
      {65536.0f, 0x7B, "saturates"},
      {-1e9f, 0xFB, "saturates, negative"},
      {0x1p-16f, 0x01, "2^-16, the smallest subnormal"},
      {0x1p-17f, 0x00, "half of it: a tie, to 0 (even)"},
      {0x1.8p-17f, 0x01, "0.75 * 2^-16 rounds up"},
      {0x1.cp-15f, 0x04, "3.5 * 2^-16: halfway from 0x03 (odd) to the smallest normal 2^-14"},
  });
}

TEST(NumericsReduceTest, StepsAreFp32Arithmetic) {
  EXPECT_EQ(avgFactor(3), static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(avgFactor(1), 1.0f);
  EXPECT_EQ(applyAvg(7.0f, avgFactor(3)), 7.0f * static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(reduceSum(0x1p24f, 1.0f), 0x1p24f);  // rounded to fp32: 2^24 + 1 is not a float
  EXPECT_EQ(reduceProd(3.0f, -0.5f), -1.5f);
  EXPECT_EQ(preMultiply(0.25f, 6.0f), 1.5f);
  EXPECT_EQ(reduceMax(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(reduceMin(1.0f, 2.0f), 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(reduceMax(nan, 1.0f)));  // the accumulator is kept
  EXPECT_EQ(reduceMax(1.0f, nan), 1.0f);          // a NaN x is not strictly greater
  EXPECT_TRUE(std::signbit(reduceMax(-0.0f, 0.0f)));
}

}  // namespace
}  // namespace hc::numerics
