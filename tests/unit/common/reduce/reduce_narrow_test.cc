// Hand-derived reductions of fp16, bf16 and fp8 that pin down the rules of DESIGN.md "Numerics"
// which random exact data rarely separate: accumulation in fp32 rather than in the dtype, one
// rounding at the end, avg as the fp32 sum times (float)(1/n), premulsum scalars decoded from the
// dtype, and overflow to infinity (fp16, bf16) or to the largest finite value (fp8). Every
// element of a 4097-element buffer holds the same case, so the vector loops and the scalar tail
// both run it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/reduce/reduce.h"
#include "tests/unit/common/reduce/reduce_test_util.h"

namespace hc::coll {
namespace {

using namespace hc::coll::testing;  // NOLINT: test helpers

struct NarrowCase {
  uint8_t dtype;
  uint8_t op;
  std::vector<uint32_t> inputs;   // one element per rank, in the dtype's bits
  std::vector<uint32_t> scalars;  // premulsum only
  uint32_t want;
  const char* why;
};

uint32_t reduceOne(const NarrowCase& c) {
  const size_t count = 4097;
  const size_t width = kElementBytes[c.dtype];
  std::vector<std::vector<uint8_t>> in(c.inputs.size(), std::vector<uint8_t>(count * width));
  std::vector<const void*> inputs;
  for (size_t r = 0; r < c.inputs.size(); ++r) {
    for (size_t j = 0; j < count; ++j) std::memcpy(&in[r][j * width], &c.inputs[r], width);
    inputs.push_back(in[r].data());
  }
  std::vector<uint8_t> out(count * width, 0x5c);
  void* outputs[] = {out.data()};
  std::vector<uint64_t> scalars(c.scalars.begin(), c.scalars.end());
  ReduceSpec spec{Dtype{c.dtype},
                  RedOp{c.op},
                  inputs.data(),
                  inputs.size(),
                  outputs,
                  1,
                  c.op == kPreMulSum ? scalars.data() : nullptr,
                  inputs.size()};
  reduceRange(spec, 0, count);
  uint32_t first = 0;
  std::memcpy(&first, out.data(), width);
  for (size_t j = 1; j < count; ++j) {
    uint32_t v = 0;
    std::memcpy(&v, &out[j * width], width);
    if (v != first) ADD_FAILURE() << "element " << j << " differs from element 0";
  }
  return first;
}

void expectCase(const NarrowCase& c) {
  EXPECT_EQ(reduceOne(c), c.want) << dtypeName(Dtype{c.dtype}) << " " << redOpName(RedOp{c.op})
                                  << ": " << c.why;
}

void expectReduces(uint8_t dtype, uint8_t op, std::vector<uint32_t> inputs, uint32_t want,
                   const char* why) {
  expectCase({dtype, op, std::move(inputs), {}, want, why});
}

void expectPreMulSum(uint8_t dtype, std::vector<uint32_t> inputs, std::vector<uint32_t> scalars,
                     uint32_t want, const char* why) {
  expectCase({dtype, kPreMulSum, std::move(inputs), std::move(scalars), want, why});
}

TEST(ReduceNarrowTest, AccumulatesInFp32AndRoundsOnce) {
  expectReduces(
      kFloat16, kSum, {0x6800, 0x3C00, 0x3C00}, 0x6801,
      "2048 + 1 + 1 = 2050 exactly in fp32, an fp16 value; accumulating in fp16 would round "
      "2049 to 2048 (a tie, to even) twice and give 2048");
  expectReduces(kBfloat16, kSum, {0x3F80, 0x3B80, 0x3B80}, 0x3F81,
                "1 + 2^-8 + 2^-8 = 1 + 2^-7 (0x3F81); in bf16 each 1 + 2^-8 would tie back to 1");
  expectReduces(kFp8e4m3, kSum, {0x48, 0x28, 0x28}, 0x49,
                "4 + 0.25 + 0.25 = 4.5 (0x49); in e4m3 each 4 + 0.25 would tie back to 4 (0x48)");
  expectReduces(
      kFp8e5m2, kProd, {0x3D, 0x3D, 0x3E}, 0x41,
      "1.25 * 1.25 * 1.5 = 2.34375 rounds once to 2.5 (0x41); rounding 1.5625 to 1.5 first "
      "would give 2.25, a tie that goes to 2 (0x40)");
}

TEST(ReduceNarrowTest, AvgMultipliesTheFp32SumByTheRoundedReciprocal) {
  expectReduces(
      kFloat16, kAvg, {0x667F, 0x37FF, 0x6681}, 0x6456,
      "1663 + 0.499755859375 + 1665 = 3328.499755859375 (exact in fp32). Times "
      "(float)(1/3) = 0x3EAAAAAB it is 1109.49995..., which fp32 rounds to 1109.5, a tie between "
      "1109 (0x6455, odd) and 1110 (0x6456). The exact mean 1109.4999186 would give 0x6455");
  expectReduces(
      kFloat16, kAvg, {0x7BFF, 0x7BFF}, 0x7BFF,
      "65504 + 65504 = 131008 overflows fp16 but not the fp32 sum; times 0.5 it is 65504");
  expectReduces(kFp8e4m3, kAvg, {0x7E, 0x7E, 0x7E, 0x7E}, 0x7E,
                "4 * 448 = 1792 in fp32, times 0.25 is 448 again");
}

TEST(ReduceNarrowTest, PreMulSumDecodesTheScalarsFromTheDtype) {
  expectPreMulSum(kFloat16, {0x4200, 0x4400}, {0x3800, 0xBC00}, 0xC100,
                  "scalars 0.5 and -1: 0.5 * 3 + (-1) * 4 = -2.5");
  expectPreMulSum(
      kFp8e4m3, {0x44, 0x3C}, {0x34, 0x34}, 0x46,
      "scalars 0.75: 0.75 * 3 + 0.75 * 1.5 = 3.375, a tie between 3.25 (0x45) and 3.5 (0x46)");
  expectPreMulSum(kBfloat16, {0x4040}, {0xC000}, 0xC0C0, "one rank, scalar -2: -2 * 3 = -6");
}

TEST(ReduceNarrowTest, OverflowGivesInfinityForFp16AndBf16AndSaturatesFp8) {
  expectReduces(kFloat16, kSum, {0x7BFF, 0x7BFF}, 0x7C00, "65504 + 65504 = 131008 > 65520: +inf");
  expectReduces(kFloat16, kSum, {0xFBFF, 0xFBFF}, 0xFC00, "the same, negative: -inf");
  expectReduces(kBfloat16, kProd, {0x7F00, 0x4000}, 0x7F80,
                "2^127 * 2 overflows fp32 to +inf, and bf16 keeps it");
  expectReduces(kFp8e4m3, kSum, {0x7E, 0x7E}, 0x7E, "448 + 448 = 896 saturates to 448, never NaN");
  expectReduces(kFp8e4m3, kSum, {0xFE, 0xFE}, 0xFE, "negative: -448");
  expectReduces(kFp8e5m2, kSum, {0x7B, 0x7B}, 0x7B, "57344 + 57344 saturates to 57344, not inf");
  expectReduces(kFp8e5m2, kMax, {0x7C, 0x3C}, 0x7B, "max(+inf, 1) = +inf, stored saturated");
}

}  // namespace
}  // namespace hc::coll
