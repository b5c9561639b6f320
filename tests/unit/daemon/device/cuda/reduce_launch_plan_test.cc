// ReduceLaunchPlan (daemon/device/kernels/launch_plan.h), the planning both GPU backends share:
// the checks, how inputs beyond one launch's 16 chain through a partial result, and which
// outputs get a copy. The plans are also run through the kernels' host math, to show that a chain
// gives the result of one pass. Needs no GPU and no driver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/device/kernels/launch_plan.h"
#include "daemon/device/kernels/reduce_math.h"

namespace hc::device::kernels {
namespace {

using ::testing::HasSubstr;

// Distinct, never dereferenced buffer addresses: the planner only arranges pointers.
std::vector<const void*> fakeInputs(size_t n, uintptr_t base = 0x10000) {
  std::vector<const void*> in;
  for (size_t i = 0; i < n; ++i) in.push_back(reinterpret_cast<const void*>(base + 0x100 * i));
  return in;
}

std::vector<void*> fakeOutputs(size_t n, uintptr_t base = 0x90000) {
  std::vector<void*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(reinterpret_cast<void*>(base + 0x100 * i));
  return out;
}

ReduceWork workOf(uint8_t dtype, uint8_t redop, const std::vector<const void*>& in,
                  const std::vector<void*>& out, size_t count = 4) {
  ReduceWork work;
  work.dtype = Dtype{dtype};
  work.redop = RedOp{redop};
  work.inputs = in;
  work.outputs = out;
  work.nRanks = in.size();
  work.count = count;
  return work;
}

TEST(ReduceLaunchPlanTest, OneLaunchCarriesTheWorkAsGiven) {
  const auto in = fakeInputs(3);
  const auto out = fakeOutputs(2);
  Result<ReduceLaunchPlan> plan =
      ReduceLaunchPlan::make(workOf(kDtypeInt32, kRedopAvg, in, out), "CUDA");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  ASSERT_EQ(plan->launchCount(), 1u);
  const ReduceArgs args = plan->launch(0);
  EXPECT_EQ(args.nIn, 3u);
  EXPECT_EQ(args.nOut, 2u);
  EXPECT_EQ(args.redop, uint32_t{kRedopAvg});
  EXPECT_EQ(args.count, 4u);
  EXPECT_EQ(args.nRanks, 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(args.in[i], in[i]);
  for (uint32_t o = 0; o < 2; ++o) EXPECT_EQ(args.out[o], out[o]);
  // The ABI asks for zeros past nIn / nOut.
  EXPECT_EQ(args.in[3], nullptr);
  EXPECT_EQ(args.out[2], nullptr);
  EXPECT_EQ(args.scalars[0], 0u);
  EXPECT_TRUE(plan->copyTargets().empty());
}

// Every input is read exactly once, in rank order; every launch after the first starts from the
// partial result with scalar 1; only the last writes the outputs and applies Avg.
class ReduceLaunchPlanChainTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ReduceLaunchPlanChainTest, ReadsEveryInputOnceInRankOrder) {
  const size_t nIn = GetParam();
  const auto in = fakeInputs(nIn);
  const auto out = fakeOutputs(2);
  std::vector<uint64_t> scalars;
  for (size_t i = 0; i < nIn; ++i) scalars.push_back(100 + i);
  for (const uint8_t redop : {uint8_t{kRedopAvg}, uint8_t{kRedopPreMulSum}}) {
    ReduceWork work = workOf(kDtypeFloat32, redop, in, out);
    if (redop == kRedopPreMulSum) work.scalars = scalars;
    Result<ReduceLaunchPlan> plan = ReduceLaunchPlan::make(work, "CUDA");
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    const size_t expectedLaunches = nIn <= 16 ? 1 : 1 + (nIn - 16 + 14) / 15;
    ASSERT_EQ(plan->launchCount(), expectedLaunches);
    size_t next = 0;
    for (size_t l = 0; l < plan->launchCount(); ++l) {
      const ReduceArgs args = plan->launch(l);
      const bool last = l + 1 == plan->launchCount();
      uint32_t slot = 0;
      if (l > 0) {
        EXPECT_EQ(args.in[0], out[0]) << "launch " << l << " starts from the partial result";
        EXPECT_EQ(args.scalars[0], 0x3F800000u) << "fp32 1.0";
        slot = 1;
      }
      for (; slot < args.nIn; ++slot, ++next) {
        ASSERT_LT(next, nIn);
        EXPECT_EQ(args.in[slot], in[next]);
        EXPECT_EQ(args.scalars[slot], redop == kRedopPreMulSum ? scalars[next] : 0u);
      }
      EXPECT_EQ(args.nOut, last ? 2u : 1u);
      EXPECT_EQ(args.out[0], out[0]);
      EXPECT_EQ(args.redop, last || redop != kRedopAvg ? uint32_t{redop} : uint32_t{kRedopSum});
    }
    EXPECT_EQ(next, nIn);
  }
}

INSTANTIATE_TEST_SUITE_P(InputCounts, ReduceLaunchPlanChainTest,
                         ::testing::Values(1, 16, 17, 31, 32, 46, 47, 64, 129));

TEST(ReduceLaunchPlanTest, KeepsThePartialInAnOutputNoLaterLaunchReads) {
  const auto in = fakeInputs(20);
  std::vector<void*> out = {const_cast<void*>(in[18]), fakeOutputs(1)[0]};  // out[0] in place
  Result<ReduceLaunchPlan> plan =
      ReduceLaunchPlan::make(workOf(kDtypeInt64, kRedopSum, in, out), "HIP");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  ASSERT_EQ(plan->launchCount(), 2u);
  EXPECT_EQ(plan->launch(0).out[0], out[1]);
  EXPECT_EQ(plan->launch(1).in[0], out[1]);
  EXPECT_EQ(plan->launch(1).scalars[0], 1u);
}

TEST(ReduceLaunchPlanTest, RefusesWhenEveryOutputIsALaterInput) {
  const auto in = fakeInputs(20);
  std::vector<void*> out = {const_cast<void*>(in[17]), const_cast<void*>(in[19])};
  Result<ReduceLaunchPlan> plan =
      ReduceLaunchPlan::make(workOf(kDtypeInt64, kRedopSum, in, out), "HIP");
  EXPECT_EQ(plan.status().code(), Code::InvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("no room for the partial result"));
}

TEST(ReduceLaunchPlanTest, RefusesNarrowFloatsBeyondOneLaunchNamingTheBackend) {
  const auto out = fakeOutputs(1);
  for (const uint8_t dtype : {uint8_t{kDtypeFloat16}, uint8_t{kDtypeBfloat16},
                              uint8_t{kDtypeFp8E4M3}, uint8_t{kDtypeFp8E5M2}}) {
    const auto sixteen = fakeInputs(16);
    EXPECT_TRUE(ReduceLaunchPlan::make(workOf(dtype, kRedopSum, sixteen, out), "HIP").isOk());
    const auto seventeen = fakeInputs(17);
    Result<ReduceLaunchPlan> plan =
        ReduceLaunchPlan::make(workOf(dtype, kRedopSum, seventeen, out), "HIP");
    EXPECT_EQ(plan.status().code(), Code::InvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("the HIP kernels take at most 16"));
  }
}

TEST(ReduceLaunchPlanTest, CopiesOutputsBeyondSixteenExceptTheFirstItself) {
  const auto in = fakeInputs(2);
  auto out = fakeOutputs(19);
  out[17] = out[0];
  Result<ReduceLaunchPlan> plan =
      ReduceLaunchPlan::make(workOf(kDtypeFloat64, kRedopMax, in, out, 10), "CUDA");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->launch(0).nOut, 16u);
  EXPECT_EQ(plan->copySource(), out[0]);
  EXPECT_EQ(plan->copyTargets(), (std::vector<void*>{out[16], out[18]}));
  EXPECT_EQ(plan->copyBytes(), 80u);
}

TEST(ReduceLaunchPlanTest, ZeroElementsPlanNothingBeforeLookingAtBuffers) {
  std::vector<const void*> in = {nullptr};
  const auto out = fakeOutputs(20);
  Result<ReduceLaunchPlan> plan =
      ReduceLaunchPlan::make(workOf(kDtypeInt8, kRedopSum, in, out, 0), "CUDA");
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->launchCount(), 0u);
  EXPECT_TRUE(plan->copyTargets().empty());
}

TEST(ReduceLaunchPlanTest, RefusesMalformedWork) {
  const auto in = fakeInputs(2);
  const auto out = fakeOutputs(1);
  const ReduceWork good = workOf(kDtypeInt32, kRedopSum, in, out);
  ASSERT_TRUE(ReduceLaunchPlan::make(good, "CUDA").isOk());
  auto refused = [](const ReduceWork& work) {
    return ReduceLaunchPlan::make(work, "CUDA").status().code() == Code::InvalidArgument;
  };
  ReduceWork noInputs = good;
  noInputs.inputs = {};
  EXPECT_TRUE(refused(noInputs));
  ReduceWork noOutputs = good;
  noOutputs.outputs = {};
  EXPECT_TRUE(refused(noOutputs));
  const uint64_t oneScalar[] = {1};
  ReduceWork scalarMismatch = good;
  scalarMismatch.scalars = oneScalar;
  EXPECT_TRUE(refused(scalarMismatch));
  ReduceWork noRanks = good;
  noRanks.nRanks = 0;
  EXPECT_TRUE(refused(noRanks));
  ReduceWork preMulWithoutScalars = good;
  preMulWithoutScalars.redop = RedOp{kRedopPreMulSum};
  EXPECT_TRUE(refused(preMulWithoutScalars));
  const std::vector<const void*> nullInput = {in[0], nullptr};
  EXPECT_TRUE(refused(workOf(kDtypeInt32, kRedopSum, nullInput, out)));
  const std::vector<void*> nullOutput = {nullptr};
  EXPECT_TRUE(refused(workOf(kDtypeInt32, kRedopSum, in, nullOutput)));
}

// The plan run through the kernels' host math, launch after launch as a stream would, against the
// sum worked out directly: a chain of launches gives the result of one pass, Avg divides once.
TEST(ReduceLaunchPlanTest, ChainedLaunchesGiveTheResultOfOnePass) {
  constexpr size_t kRanks = 40;
  constexpr size_t kCount = 3;
  std::vector<std::vector<int64_t>> buffers(kRanks, std::vector<int64_t>(kCount));
  std::vector<const void*> in;
  for (size_t r = 0; r < kRanks; ++r) {
    for (size_t e = 0; e < kCount; ++e) buffers[r][e] = static_cast<int64_t>(r * 1000 + e * 7);
    in.push_back(buffers[r].data());
  }
  for (const uint8_t redop : {uint8_t{kRedopSum}, uint8_t{kRedopAvg}, uint8_t{kRedopMax}}) {
    std::vector<int64_t> result(kCount, -1);
    std::vector<void*> out = {result.data()};
    Result<ReduceLaunchPlan> plan =
        ReduceLaunchPlan::make(workOf(kDtypeInt64, redop, in, out, kCount), "CUDA");
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    ASSERT_EQ(plan->launchCount(), 3u);
    for (size_t l = 0; l < plan->launchCount(); ++l) {
      ASSERT_TRUE(reduceStridedByDtype(kDtypeInt64, plan->launch(l), 0, 1));
    }
    for (size_t e = 0; e < kCount; ++e) {
      int64_t sum = 0;
      for (size_t r = 0; r < kRanks; ++r) sum += buffers[r][e];
      const int64_t max = buffers[kRanks - 1][e];
      const int64_t expected = redop == kRedopSum   ? sum
                               : redop == kRedopAvg ? sum / static_cast<int64_t>(kRanks)
                                                    : max;
      EXPECT_EQ(result[e], expected) << "redop " << int{redop} << " element " << e;
    }
  }
}

}  // namespace
}  // namespace hc::device::kernels
