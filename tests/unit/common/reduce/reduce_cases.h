// makeCase(): the data and expected result of a reduction of any of the 12 dtypes. The integer,
// fp32 and fp64 cases come from reduce_test_util.h; this file holds those of fp16, bf16, fp8 e4m3
// and fp8 e5m2 and their reference reduction, built on the independent decoder and rounding of
// tests/unit/common/float_reference.h: inputs are decoded to double, reduced in double in the
// kernel's order (input 0, 1, ...), and rounded once. The data
// keep every partial result exact in fp32 (the kernels' accumulator), so computing in double
// gives the kernels' fp32 values; makeNarrowCase checks that, so a data mistake fails loudly
// rather than passing as a kernel bug.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "tests/unit/common/float_reference.h"
#include "tests/unit/common/reduce/reduce_test_util.h"

namespace hc::coll::testing {

using hc::testing::FormatSpec;
using hc::testing::ReferenceRounder;

// Inputs are 0 or have a magnitude in [2^lo, 2^(hi+1)). The window keeps every partial result of
// up to 4 inputs exact in fp32: from the lowest bit of the smallest input (2^(lo - mantissa bits),
// times 2^-2 for a premulsum scalar) to the top bit of the largest sum (4 * 2^(hi+1), times 3 for a
// scalar) spans at most 24 bits. It reaches each format's overflow except bf16's, whose overflow
// would overflow the fp32 accumulator too. fp8 e4m3's window holds all of its finite values.
struct Window {
  int lo;
  int hi;
};

inline Window exactWindow(uint8_t dtype, uint8_t op) {
  const bool premul = op == kPreMulSum;
  switch (dtype) {
    case kFloat16:
      return premul ? Window{8, 15} : Window{5, 15};
    case kBfloat16:
      return premul ? Window{-5, 5} : Window{-7, 6};
    case kFp8e4m3:
      return premul ? Window{-6, 8} : Window{-9, 8};
    default:  // fp8 e5m2
      return premul ? Window{0, 15} : Window{-3, 15};
  }
}

// The rounder of a dtype, built once.
inline const ReferenceRounder& rounderFor(uint8_t dtype) {
  static const ReferenceRounder fp16(hc::testing::kFp16Spec), bf16(hc::testing::kBf16Spec),
      e4m3(hc::testing::kE4M3Spec), e5m2(hc::testing::kE5M2Spec);
  switch (dtype) {
    case kFloat16:
      return fp16;
    case kBfloat16:
      return bf16;
    case kFp8e4m3:
      return e4m3;
    default:
      return e5m2;
  }
}

// The non-negative encodings within a dtype's window for op, zero included; built once.
inline const std::vector<uint32_t>& windowValues(uint8_t dtype, uint8_t op) {
  static std::map<std::pair<uint8_t, bool>, std::vector<uint32_t>> cache;
  std::vector<uint32_t>& values = cache[{dtype, op == kPreMulSum}];
  if (values.empty()) {
    const Window w = exactWindow(dtype, op);
    for (const auto& [v, bits] : rounderFor(dtype).finiteValues()) {
      if (v == 0 || (v >= std::ldexp(1.0, w.lo) && v < std::ldexp(1.0, w.hi + 1))) {
        values.push_back(bits);
      }
    }
  }
  return values;
}

// Prod: integers in [-8, 8] (every format holds them; products of 4 stay below 2^13). Otherwise a
// random finite encoding within the window, with a random sign (so zeros of both signs too).
inline uint32_t randomNarrowBits(uint8_t dtype, std::mt19937_64& rng, uint8_t op) {
  const ReferenceRounder& ref = rounderFor(dtype);
  if (op == kProd) return ref.round(static_cast<double>(static_cast<int>(rng() % 17) - 8));
  const std::vector<uint32_t>& values = windowValues(dtype, op);
  const uint64_t r = rng();
  return values[(r >> 1) % values.size()] | ((r & 1) ? ref.format().signBit() : 0u);
}

// PreMulSum scalars: at most two significant bits, in [2^-2, 3], so products stay exact.
inline uint32_t randomNarrowScalar(const ReferenceRounder& ref, std::mt19937_64& rng) {
  static const double kScalars[] = {0,  0.25, -0.25, 0.5, -0.5, 0.75, -0.75, 1,
                                    -1, 1.5,  -1.5,  2,   -2,   3,    -3};
  return ref.round(kScalars[rng() % (sizeof(kScalars) / sizeof(kScalars[0]))]);
}

// The kernels' arithmetic on exact data: double equals fp32 as long as every step is a float.
class ExactFp32 {
 public:
  double step(double v) {
    exact_ = exact_ && static_cast<double>(static_cast<float>(v)) == v;
    return v;
  }
  bool exact() const { return exact_; }

 private:
  bool exact_ = true;
};

// The expected encoding of one element, from the decoded inputs x (rank order) and scalars s.
inline uint32_t referenceNarrowElement(const ReferenceRounder& ref, const std::vector<double>& x,
                                       const std::vector<double>& s, uint8_t op, ExactFp32* fp32) {
  double acc = op == kPreMulSum ? fp32->step(s[0] * x[0]) : x[0];
  for (size_t r = 1; r < x.size(); ++r) {
    switch (op) {
      case kSum:
      case kAvg:
        acc = fp32->step(acc + x[r]);
        break;
      case kProd:
        acc = fp32->step(acc * x[r]);
        break;
      case kMax:
        acc = acc < x[r] ? x[r] : acc;
        break;
      case kMin:
        acc = x[r] < acc ? x[r] : acc;
        break;
      default:  // premulsum
        acc = fp32->step(acc + fp32->step(s[r] * x[r]));
        break;
    }
  }
  if (op == kAvg) {
    // One fp32 multiplication by (float)(1/n): the product of two floats is exact in double, so
    // converting it to float rounds once, as the fp32 multiplication does.
    const float factor = static_cast<float>(1.0 / static_cast<double>(x.size()));
    acc = static_cast<float>(acc * static_cast<double>(factor));
  }
  return ref.round(acc);
}

inline void putBits(std::vector<uint8_t>* bytes, size_t j, size_t width, uint32_t bits) {
  for (size_t b = 0; b < width; ++b)
    (*bytes)[j * width + b] = static_cast<uint8_t>(bits >> (8 * b));
}

inline uint32_t getBits(const std::vector<uint8_t>& bytes, size_t j, size_t width) {
  uint32_t bits = 0;
  for (size_t b = 0; b < width; ++b) bits |= uint32_t{bytes[j * width + b]} << (8 * b);
  return bits;
}

inline CaseData makeNarrowCase(uint8_t dtype, uint8_t op, size_t nInputs, size_t count,
                               uint64_t seed) {
  const ReferenceRounder& ref = rounderFor(dtype);
  const FormatSpec& f = ref.format();
  const size_t width = static_cast<size_t>(f.width()) / 8;
  std::mt19937_64 rng(seed);
  CaseData c;
  c.elementBytes = width;
  c.count = count;
  c.inputs.assign(nInputs, std::vector<uint8_t>(count * width));
  std::vector<double> scalars(nInputs);
  for (size_t i = 0; i < nInputs; ++i) {
    const uint32_t bits = randomNarrowScalar(ref, rng);
    c.scalars.push_back(bits);
    scalars[i] = hc::testing::referenceDecode(f, bits);
  }
  c.want.assign(count * width, 0);
  ExactFp32 fp32;
  std::vector<double> column(nInputs);
  for (size_t j = 0; j < count; ++j) {
    for (size_t i = 0; i < nInputs; ++i) {
      const uint32_t bits = randomNarrowBits(dtype, rng, op);
      putBits(&c.inputs[i], j, width, bits);
      column[i] = hc::testing::referenceDecode(f, bits);
    }
    putBits(&c.want, j, width, referenceNarrowElement(ref, column, scalars, op, &fp32));
  }
  EXPECT_TRUE(fp32.exact()) << "test data for " << f.name << " are not exact in fp32";
  return c;
}

inline CaseData makeCase(uint8_t dtype, uint8_t op, size_t nInputs, size_t count, uint64_t seed) {
  switch (dtype) {
    case kInt8:
      return makeWideCase<int8_t>(op, nInputs, count, seed);
    case kUint8:
      return makeWideCase<uint8_t>(op, nInputs, count, seed);
    case kInt32:
      return makeWideCase<int32_t>(op, nInputs, count, seed);
    case kUint32:
      return makeWideCase<uint32_t>(op, nInputs, count, seed);
    case kInt64:
      return makeWideCase<int64_t>(op, nInputs, count, seed);
    case kUint64:
      return makeWideCase<uint64_t>(op, nInputs, count, seed);
    case kFloat32:
      return makeWideCase<float>(op, nInputs, count, seed);
    case kFloat64:
      return makeWideCase<double>(op, nInputs, count, seed);
    default:
      return makeNarrowCase(dtype, op, nInputs, count, seed);
  }
}

}  // namespace hc::coll::testing
