// The test side's own arithmetic: the seeded values must be right before any daemon result is
// judged by them, so the inputs are checked against the exactness promise of worker_values.h.
// The conversions they are rounded with are checked in
// tests/unit/common/narrow_float_reference_test.cc.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/integration/worker_values.h"

namespace hc::integ {
namespace {

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
