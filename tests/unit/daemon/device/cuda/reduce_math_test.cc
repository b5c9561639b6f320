// The GPU kernels' element math (daemon/device/kernels/reduce_math.h), compiled by g++ and run on
// the host, against the host reduction coll::reduceRange(): every dtype x operator x input count,
// on random bit patterns (NaN, infinities, subnormals and values that overflow or saturate
// included), in place and out of place, and split into strided "threads" as a grid would run it.
// Mismatches are counted bit for bit (a NaN matches any NaN of the dtype). Hand-computed cases pin
// the rules themselves, so that the two implementations cannot agree on a wrong answer.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/reduce/reduce.h"
#include "daemon/device/kernels/reduce_math.h"
#include "tests/unit/daemon/device/cuda/reduce_test_values.h"

namespace hc::device::kernels {
namespace {

using namespace testing;  // NOLINT: the shared test values

struct Case {
  uint32_t dtype;
  uint32_t redop;
  uint32_t nIn;
  uint32_t nOut;
  uint64_t count;
  uint64_t nRanks;
  bool inPlace;  // output 0 is input 0
  uint64_t seed;
};

std::string describe(const Case& c) {
  return std::string(kDtypeNames[c.dtype]) + " " + kRedopNames[c.redop] +
         " nIn=" + std::to_string(c.nIn) + " nOut=" + std::to_string(c.nOut) +
         " count=" + std::to_string(c.count) + " nRanks=" + std::to_string(c.nRanks) +
         (c.inPlace ? " in-place" : "");
}

// Runs one case through both implementations; returns the number of mismatching elements over
// every output (and writes a description of the first into *firstMismatch).
size_t countMismatches(const Case& c, std::string* firstMismatch) {
  std::mt19937_64 rng(c.seed);
  const size_t bytes = c.count * kElementBytes[c.dtype];
  std::vector<std::vector<uint8_t>> inputs(c.nIn, std::vector<uint8_t>(bytes));
  for (auto& in : inputs) {
    for (size_t i = 0; i < c.count; ++i) storeElement(in, c.dtype, i, randomElement(rng, c.dtype));
  }
  std::vector<uint64_t> scalars(c.nIn);
  for (auto& s : scalars) s = scalarSlot(c.dtype, randomElement(rng, c.dtype));

  // The reference runs on its own copy of the inputs, so in-place runs start from the same data.
  std::vector<std::vector<uint8_t>> refInputs = inputs;
  std::vector<std::vector<uint8_t>> refOutputs(c.nOut, std::vector<uint8_t>(bytes, 0xEE));
  std::vector<std::vector<uint8_t>> outputs(c.nOut, std::vector<uint8_t>(bytes, 0xEE));

  std::vector<const void*> refIn;
  for (auto& in : refInputs) refIn.push_back(in.data());
  std::vector<void*> refOut;
  for (auto& out : refOutputs) refOut.push_back(out.data());
  if (c.inPlace) refOut[0] = refInputs[0].data();
  coll::ReduceSpec spec{Dtype{static_cast<uint8_t>(c.dtype)},
                        RedOp{static_cast<uint8_t>(c.redop)},
                        refIn.data(),
                        refIn.size(),
                        refOut.data(),
                        refOut.size(),
                        scalars.data(),
                        c.nRanks};
  coll::reduceRange(spec, 0, c.count);

  ReduceArgs args{};
  for (uint32_t k = 0; k < c.nIn; ++k) {
    args.in[k] = inputs[k].data();
    args.scalars[k] = scalars[k];
  }
  for (uint32_t o = 0; o < c.nOut; ++o) args.out[o] = outputs[o].data();
  if (c.inPlace) args.out[0] = inputs[0].data();
  args.nIn = c.nIn;
  args.nOut = c.nOut;
  args.count = c.count;
  args.redop = c.redop;
  args.nRanks = c.nRanks;
  EXPECT_TRUE(reduceStridedByDtype(c.dtype, args, 0, 1));

  size_t mismatches = 0;
  const size_t elementBytes = kElementBytes[c.dtype];
  for (uint32_t o = 0; o < c.nOut; ++o) {
    const auto* want = static_cast<const uint8_t*>(refOut[o]);
    const auto* got = static_cast<const uint8_t*>(args.out[o]);
    for (size_t i = 0; i < c.count; ++i) {
      uint64_t w = 0, g = 0;
      std::memcpy(&w, want + i * elementBytes, elementBytes);
      std::memcpy(&g, got + i * elementBytes, elementBytes);
      if (w == g || (isNan(c.dtype, w) && isNan(c.dtype, g))) continue;
      if (mismatches++ == 0) {
        *firstMismatch = describe(c) + ": output " + std::to_string(o) + " element " +
                         std::to_string(i) + " reference " + hex(w) + " kernel " + hex(g);
      }
    }
  }
  return mismatches;
}

TEST(ReduceMathTest, MatchesHostReductionBitwiseForEveryDtypeAndOperator) {
  size_t cases = 0;
  size_t failures = 0;
  uint64_t seed = 1;
  for (uint32_t dtype = 0; dtype < kDtypes; ++dtype) {
    for (uint32_t redop = 0; redop < kRedops; ++redop) {
      for (uint32_t nIn : {1u, 2u, 3u, 5u, 16u}) {
        for (uint64_t count : {uint64_t{1}, uint64_t{33}, uint64_t{1000}}) {
          for (bool inPlace : {false, true}) {
            // Avg also with a divisor other than the input count, as a partial reduction has.
            const uint64_t nRanks = redop == kRedopAvg && inPlace ? nIn + 3 : nIn;
            const Case c{dtype, redop, nIn, inPlace ? 1u : 3u, count, nRanks, inPlace, seed++};
            std::string first;
            const size_t bad = countMismatches(c, &first);
            ++cases;
            if (bad != 0) {
              ++failures;
              ADD_FAILURE() << bad << " mismatching elements; first: " << first;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << cases << " cases";
}

TEST(ReduceMathTest, StridedThreadsProduceTheWholeResult) {
  // As a grid of 7 threads would run it: each takes every 7th element.
  constexpr uint64_t kCount = 100;
  std::vector<float> a(kCount), b(kCount), out(kCount, -1.0f);
  for (uint64_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f;
  }
  ReduceArgs args{};
  args.in[0] = a.data();
  args.in[1] = b.data();
  args.out[0] = out.data();
  args.nIn = 2;
  args.nOut = 1;
  args.count = kCount;
  args.redop = kRedopSum;
  args.nRanks = 2;
  for (uint64_t thread = 0; thread < 7; ++thread) {
    reduceStrided<Fp32Element>(args, thread, 7);
  }
  for (uint64_t i = 0; i < kCount; ++i) EXPECT_EQ(out[i], static_cast<float>(i) + 0.5f) << i;
}

// Reduces two or three single elements of a dtype given by bits; returns the result's bits.
template <typename E>
uint64_t reduceOne(uint32_t redop, std::vector<typename E::Storage> values,
                   std::vector<uint64_t> scalars = {}, uint64_t nRanks = 0) {
  typename E::Storage out{};
  ReduceArgs args{};
  for (size_t k = 0; k < values.size(); ++k) {
    args.in[k] = &values[k];
    args.scalars[k] = k < scalars.size() ? scalars[k] : 0;
  }
  args.out[0] = &out;
  args.nIn = static_cast<uint32_t>(values.size());
  args.nOut = 1;
  args.count = 1;
  args.redop = redop;
  args.nRanks = nRanks == 0 ? values.size() : nRanks;
  reduceStrided<E>(args, 0, 1);
  uint64_t bits = 0;
  std::memcpy(&bits, &out, sizeof(out));
  return bits;
}

TEST(ReduceMathTest, HandComputedRules) {
  // Integers wrap and avg divides after the (wrapped) sum, truncating toward zero.
  EXPECT_EQ(reduceOne<Int8Element>(kRedopSum, {100, 100}), 0xC8u);      // 200 wraps to -56
  EXPECT_EQ(reduceOne<Int8Element>(kRedopAvg, {-128, -1}), 63u);        // -129 wraps to 127
  EXPECT_EQ(reduceOne<Int32Element>(kRedopAvg, {-7, 0}), 0xFFFFFFFDu);  // -3.5 -> -3
  EXPECT_EQ(reduceOne<Uint8Element>(kRedopProd, {16, 17}), 16u);        // 272 mod 256
  EXPECT_EQ(reduceOne<Int8Element>(kRedopMax, {-1, 1}), 1u);            // signed compare
  EXPECT_EQ(reduceOne<Uint8Element>(kRedopMax, {0xFF, 1}), 0xFFu);      // unsigned compare
  EXPECT_EQ(reduceOne<Int32Element>(kRedopPreMulSum, {3, 4}, {2, 0xFFFFFFFF}), 2u);  // 6 - 4
  // fp32: avg multiplies the sum by (float)(1/3): 5 * 0.33333334f = 1.6666667f (0x3FD55556),
  // where 5/3 would round to 0x3FD55555. max keeps a NaN accumulator and drops a later NaN.
  const uint32_t nan = 0x7FC00000u;
  EXPECT_EQ(reduceOne<Fp32Element>(kRedopAvg, {2.0f, 2.0f, 1.0f}), 0x3FD55556u);
  EXPECT_EQ(reduceOne<Fp32Element>(kRedopMax, {std::bit_cast<float>(nan), 1.0f}), nan);
  EXPECT_EQ(reduceOne<Fp32Element>(kRedopMax, {1.0f, std::bit_cast<float>(nan)}),
            std::bit_cast<uint32_t>(1.0f));
  EXPECT_EQ(reduceOne<Fp32Element>(kRedopMin, {-0.0f, 0.0f}), 0x80000000u);  // earlier zero wins
  // Narrow floats accumulate in fp32 and encode once: 2048 + 1 + 1 is 2050 in fp16 (an fp16
  // accumulator would round 2049 back to 2048 at each step).
  EXPECT_EQ(reduceOne<Fp16Element>(kRedopSum, {0x6800, 0x3C00, 0x3C00}), 0x6801u);
  EXPECT_EQ(reduceOne<Fp16Element>(kRedopSum, {0x7BFF, 0x7BFF}), 0x7C00u);  // 65504*2 -> inf
  EXPECT_EQ(reduceOne<Fp8E4M3Element>(kRedopSum, {0x7E, 0x7E}), 0x7Eu);     // 448*2 saturates
  EXPECT_EQ(reduceOne<Fp8E5M2Element>(kRedopSum, {0x7B, 0x7B}), 0x7Bu);     // 57344*2 saturates
  EXPECT_EQ(reduceOne<Fp8E4M3Element>(kRedopSum, {0x7F, 0x38}), 0x7Fu);     // NaN stays NaN
  EXPECT_EQ(reduceOne<Bf16Element>(kRedopPreMulSum, {0x3F80, 0x4000}, {0x4000, 0x3F00}),
            0x4040u);  // 2 * 1 + 0.5 * 2 = 3
}

TEST(ReduceMathTest, UnknownDtypeOrOperatorWritesNothing) {
  float a = 1.0f, out = -7.0f;
  ReduceArgs args{};
  args.in[0] = &a;
  args.out[0] = &out;
  args.nIn = 1;
  args.nOut = 1;
  args.count = 1;
  args.redop = kRedopPreMulSum + 1;
  args.nRanks = 1;
  EXPECT_TRUE(reduceStridedByDtype(kDtypeFloat32, args, 0, 1));
  EXPECT_EQ(out, -7.0f);
  args.redop = kRedopSum;
  EXPECT_FALSE(reduceStridedByDtype(kNumKernelDtypes, args, 0, 1));
  EXPECT_EQ(out, -7.0f);
}

}  // namespace
}  // namespace hc::device::kernels
