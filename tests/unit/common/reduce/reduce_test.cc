// reduceRange against an independent reference over the grid dtype (all 12) x operator x inputs x
// count x aliasing (separate outputs, every rank in place, one root in place); counts cross chunk
// boundaries, and the large cases run many chunks and a partial last one.
#include "common/reduce/reduce.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>

#include "tests/unit/common/reduce/reduce_cases.h"

namespace hc::coll {
namespace {

using namespace hc::coll::testing;  // NOLINT: test helpers

enum class Aliasing { Separate, AllInPlace, RootInPlace };

const char* aliasingName(Aliasing a) {
  switch (a) {
    case Aliasing::Separate:
      return "separate";
    case Aliasing::AllInPlace:
      return "all-in-place";
    case Aliasing::RootInPlace:
      return "root-in-place";
  }
  return "?";
}

// Runs one case and returns the number of wrong elements over every output; guard damage fails
// the test directly.
size_t runCase(uint8_t dtype, uint8_t op, const CaseData& c, Aliasing aliasing) {
  const size_t nInputs = c.inputs.size();
  const size_t bytes = c.count * c.elementBytes;
  std::vector<std::unique_ptr<GuardedBuffer>> inBufs;
  std::vector<const void*> inputs;
  for (size_t i = 0; i < nInputs; ++i) {
    inBufs.push_back(std::make_unique<GuardedBuffer>(bytes));
    if (bytes > 0) std::memcpy(inBufs.back()->data(), c.inputs[i].data(), bytes);
    inputs.push_back(inBufs.back()->data());
  }
  std::vector<std::unique_ptr<GuardedBuffer>> outBufs;
  std::vector<void*> outputs;
  switch (aliasing) {
    case Aliasing::Separate:
      for (size_t i = 0; i < nInputs; ++i) {
        outBufs.push_back(std::make_unique<GuardedBuffer>(bytes));
        std::memset(outBufs.back()->data(), 0x5c, bytes);  // stale data must be overwritten
        outputs.push_back(outBufs.back()->data());
      }
      break;
    case Aliasing::AllInPlace:
      for (auto& b : inBufs) outputs.push_back(b->data());
      break;
    case Aliasing::RootInPlace:
      outputs.push_back(inBufs.back()->data());  // the last input is folded in last
      break;
  }

  ReduceSpec spec{};
  spec.dtype = Dtype{dtype};
  spec.redop = RedOp{op};
  spec.inputs = inputs.data();
  spec.nInputs = nInputs;
  spec.outputs = outputs.data();
  spec.nOutputs = outputs.size();
  spec.scalars = op == kPreMulSum ? c.scalars.data() : nullptr;
  spec.nRanks = nInputs;
  reduceRange(spec, 0, c.count);

  size_t wrong = 0;
  for (void* out : outputs) wrong += countWrongElements(static_cast<const uint8_t*>(out), c);
  for (auto& b : inBufs) EXPECT_TRUE(b->guardsIntact());
  for (auto& b : outBufs) EXPECT_TRUE(b->guardsIntact());
  return wrong;
}

void expectAllCorrect(uint8_t dtype, uint8_t op, size_t nInputs, size_t count) {
  const uint64_t seed = dtype * 1000003u + op * 10007u + nInputs * 101u + count;
  const CaseData c = makeCase(dtype, op, nInputs, count, seed);
  for (Aliasing aliasing : {Aliasing::Separate, Aliasing::AllInPlace, Aliasing::RootInPlace}) {
    SCOPED_TRACE(std::string(dtypeName(Dtype{dtype})) + " " + redOpName(RedOp{op}) + " inputs " +
                 std::to_string(nInputs) + " count " + std::to_string(count) + " " +
                 aliasingName(aliasing));
    EXPECT_EQ(runCase(dtype, op, c, aliasing), 0u);
  }
}

class ReduceTest : public ::testing::TestWithParam<std::tuple<uint8_t, uint8_t, size_t>> {};

TEST_P(ReduceTest, MatchesReferenceForEveryCountAndAliasing) {
  auto [dtype, op, nInputs] = GetParam();
  ASSERT_TRUE(checkReduction(dtype, op).isOk());
  for (size_t count : {0, 1, 7, 4097}) expectAllCorrect(dtype, op, nInputs, count);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kSupported),
                                            ::testing::ValuesIn(kOps),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::string(dtypeName(Dtype{std::get<0>(info.param)})) + "_" +
                                  redOpName(RedOp{std::get<1>(info.param)}) + "_" +
                                  std::to_string(std::get<2>(info.param));
                         });

class ReduceLargeTest : public ::testing::TestWithParam<std::tuple<uint8_t, uint8_t, size_t>> {};

TEST_P(ReduceLargeTest, MatchesReferenceOverManyChunks) {
  auto [dtype, op, nInputs] = GetParam();
  expectAllCorrect(dtype, op, nInputs, (size_t{1} << 20) + 3);
}

INSTANTIATE_TEST_SUITE_P(
    Some, ReduceLargeTest,
    ::testing::Values(
        std::make_tuple(kFloat32, kSum, size_t{2}), std::make_tuple(kFloat64, kAvg, size_t{3}),
        std::make_tuple(kFloat32, kPreMulSum, size_t{4}), std::make_tuple(kInt8, kProd, size_t{4}),
        std::make_tuple(kUint8, kAvg, size_t{3}), std::make_tuple(kInt32, kMin, size_t{4}),
        std::make_tuple(kUint64, kPreMulSum, size_t{3}), std::make_tuple(kInt64, kMax, size_t{2}),
        std::make_tuple(kFloat16, kSum, size_t{2}), std::make_tuple(kBfloat16, kAvg, size_t{3}),
        std::make_tuple(kFp8e4m3, kPreMulSum, size_t{4}),
        std::make_tuple(kFp8e5m2, kProd, size_t{3}), std::make_tuple(kFloat16, kMin, size_t{4})),
    [](const auto& info) {
      return std::string(dtypeName(Dtype{std::get<0>(info.param)})) + "_" +
             redOpName(RedOp{std::get<1>(info.param)}) + "_" +
             std::to_string(std::get<2>(info.param));
    });

}  // namespace
}  // namespace hc::coll
