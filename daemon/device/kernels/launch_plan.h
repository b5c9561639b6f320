// How one ReduceWork runs as launches of the reduction kernels (reduce_args.h), whatever the
// vendor: the checks, the chain of launches when there are more inputs than one launch reads, and
// the copies for outputs beyond what one launch writes. Both GPU backends plan every
// reduceAsync() here and only turn the plan into their own driver calls (cuLaunchKernel /
// hipModuleLaunchKernel, then an async copy per extra output), so the two cannot drift apart.
//
// Host code only: it needs device.h (hc::Status, ReduceWork), so reduce_kernels.h never includes
// it and nvcc / hipcc never see it. Header-only: this folder has no CMake target to build a .cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/device/device.h"
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device::kernels {

// The kernels' codes are the vocabulary's values (common/vocabulary.h); reduce_args.h keeps its
// own copy only because nvcc and hipcc compile it without the project's headers.
static_assert(kNumKernelDtypes == kNumDtypes && kNumKernelRedops == kNumRedOps);
static_assert(kDtypeInt8 == uint32_t(Dtype::Int8) && kDtypeUint8 == uint32_t(Dtype::Uint8) &&
              kDtypeInt32 == uint32_t(Dtype::Int32) && kDtypeUint32 == uint32_t(Dtype::Uint32) &&
              kDtypeInt64 == uint32_t(Dtype::Int64) && kDtypeUint64 == uint32_t(Dtype::Uint64) &&
              kDtypeFloat16 == uint32_t(Dtype::Float16) &&
              kDtypeFloat32 == uint32_t(Dtype::Float32) &&
              kDtypeFloat64 == uint32_t(Dtype::Float64) &&
              kDtypeBfloat16 == uint32_t(Dtype::Bfloat16) &&
              kDtypeFp8E4M3 == uint32_t(Dtype::Fp8e4m3) &&
              kDtypeFp8E5M2 == uint32_t(Dtype::Fp8e5m2));
static_assert(kRedopSum == uint32_t(RedOp::Sum) && kRedopProd == uint32_t(RedOp::Prod) &&
              kRedopMax == uint32_t(RedOp::Max) && kRedopMin == uint32_t(RedOp::Min) &&
              kRedopAvg == uint32_t(RedOp::Avg) && kRedopPreMulSum == uint32_t(RedOp::PreMulSum));

// The PreMulSum scalar 1 in the dtype's encoding: a chained launch folds the previous launch's
// partial result in with it, and 1 * x == x exactly in every integer type, fp32 and fp64 (the
// only dtypes that chain).
inline uint64_t premulScalarOne(Dtype dtype) {
  if (dtype == Dtype::Float32) return 0x3F800000u;
  if (dtype == Dtype::Float64) return 0x3FF0000000000000u;
  return 1;
}

// The launches and copies of one ReduceWork, to be enqueued on one stream in this order:
// launch(0) ... launch(launchCount() - 1), then a copy of copyBytes() from copySource() into every
// copyTargets() entry. Stream order makes the chain correct: each launch reads the partial result
// the one before it wrote, and the copies run once every input has been read.
// Borrowed: the plan keeps the ReduceWork's spans; use it within the reduceAsync() that made it.
class ReduceLaunchPlan {
 public:
  // InvalidArgument, with a message for the caller of reduceAsync(), when the work breaks the
  // Device contract or the kernels' limits (reduce_args.h); `backend` ("CUDA", "HIP") names whose
  // kernels in that message. Zero elements plan nothing, before the buffers are looked at.
  [[nodiscard]] static Result<ReduceLaunchPlan> make(const ReduceWork& work,
                                                     std::string_view backend);

  // 0 when the work has no elements; else 1 for up to 16 inputs, 1 + ceil((inputs - 16) / 15)
  // beyond.
  size_t launchCount() const { return launchCount_; }
  // The argument block of launch i < launchCount(). The first reads inputs [0, 16); each later
  // one reads the partial result (scalar 1) and the next 15 inputs, in rank order, so the result
  // is that of one pass. Every launch but the last writes only the partial result, and sums where
  // the work averages: Avg divides once, in the last launch, which writes the first 16 outputs.
  ReduceArgs launch(size_t i) const;

  // Outputs beyond the last launch's 16 receive a copy of outputs[0]; one that is outputs[0]
  // itself is left out.
  const void* copySource() const { return work_.outputs[0]; }
  const std::vector<void*>& copyTargets() const { return copyTargets_; }
  size_t copyBytes() const { return copyBytes_; }

 private:
  ReduceLaunchPlan(const ReduceWork& work, void* partial, size_t launchCount);

  ReduceWork work_;
  void* partial_ = nullptr;  // where chained launches keep the running result
  size_t launchCount_ = 0;
  std::vector<void*> copyTargets_;
  size_t copyBytes_ = 0;
};

// Where chained launches keep their partial result: the first output that no launch after the
// first reads as an input (every launch but the last overwrites it before those inputs are read).
// Null when there is none; outputs[0] when nothing chains.
inline void* choosePartialOutput(const ReduceWork& work) {
  const auto laterInputs =
      work.inputs.subspan(std::min<size_t>(kMaxKernelInputs, work.inputs.size()));
  auto it = std::find_if(work.outputs.begin(), work.outputs.end(), [&](void* out) {
    return std::find(laterInputs.begin(), laterInputs.end(), out) == laterInputs.end();
  });
  return it == work.outputs.end() ? nullptr : *it;
}

inline Result<ReduceLaunchPlan> ReduceLaunchPlan::make(const ReduceWork& work,
                                                       std::string_view backend) {
  if (work.inputs.empty() || work.outputs.empty()) {
    return invalidArgument("reduceAsync needs at least one input and one output");
  }
  if (!work.scalars.empty() && work.scalars.size() != work.inputs.size()) {
    return invalidArgument("reduceAsync: " + std::to_string(work.scalars.size()) + " scalars for " +
                           std::to_string(work.inputs.size()) + " inputs");
  }
  if (work.nRanks == 0) return invalidArgument("reduceAsync: nRanks is 0");
  if (work.redop == RedOp::PreMulSum && work.scalars.empty()) {
    return invalidArgument("reduceAsync: premulsum without scalars");
  }
  if (work.count == 0) return ReduceLaunchPlan(work, nullptr, 0);
  for (const void* in : work.inputs) {
    if (in == nullptr) return invalidArgument("reduceAsync: null input");
  }
  for (void* out : work.outputs) {
    if (out == nullptr) return invalidArgument("reduceAsync: null output");
  }
  const size_t nIn = work.inputs.size();
  // 16- and 8-bit floats: a partial result carried from one launch to the next would be rounded
  // to the dtype, where a single pass keeps it in fp32, so these never chain.
  if (nIn > kMaxKernelInputs && isNarrowFloat(work.dtype)) {
    return invalidArgument("reduceAsync: " + std::to_string(nIn) + " inputs of a 16- or 8-bit " +
                           "float in one reduction: the " + std::string(backend) +
                           " kernels take at most " + std::to_string(kMaxKernelInputs) +
                           " (a partial result would round to the dtype); split the inputs or "
                           "stage through host memory");
  }
  void* partial = choosePartialOutput(work);
  if (partial == nullptr) {
    return invalidArgument("reduceAsync: every output is also an input beyond the first " +
                           std::to_string(kMaxKernelInputs) +
                           ", leaving no room for the partial result");
  }
  size_t launches = 1;
  if (nIn > kMaxKernelInputs) {
    constexpr size_t kInputsPerLaterLaunch = kMaxKernelInputs - 1;  // one slot holds the partial
    launches += (nIn - kMaxKernelInputs + kInputsPerLaterLaunch - 1) / kInputsPerLaterLaunch;
  }
  return ReduceLaunchPlan(work, partial, launches);
}

inline ReduceLaunchPlan::ReduceLaunchPlan(const ReduceWork& work, void* partial, size_t launchCount)
    : work_(work), partial_(partial), launchCount_(launchCount) {
  if (launchCount_ == 0) return;
  copyBytes_ = work_.count * dtypeSize(work_.dtype);
  for (size_t o = kMaxKernelOutputs; o < work_.outputs.size(); ++o) {
    if (work_.outputs[o] != work_.outputs[0]) copyTargets_.push_back(work_.outputs[o]);
  }
}

inline ReduceArgs ReduceLaunchPlan::launch(size_t i) const {
  HC_CHECK(i < launchCount_);
  ReduceArgs args{};  // entries past nIn / nOut stay zero, as the ABI asks
  args.count = work_.count;
  args.nRanks = work_.nRanks;
  uint32_t n = 0;
  size_t next = 0;  // the first of the work's inputs this launch reads
  if (i > 0) {
    args.in[n] = partial_;
    args.scalars[n] = premulScalarOne(work_.dtype);
    ++n;
    next = kMaxKernelInputs + (i - 1) * (kMaxKernelInputs - 1);
  }
  const bool preMulSum = work_.redop == RedOp::PreMulSum;
  for (; n < kMaxKernelInputs && next < work_.inputs.size(); ++n, ++next) {
    args.in[n] = work_.inputs[next];
    args.scalars[n] = preMulSum ? work_.scalars[next] : 0;
  }
  args.nIn = n;
  if (i + 1 == launchCount_) {
    args.redop = static_cast<uint32_t>(work_.redop);
    args.nOut = static_cast<uint32_t>(std::min<size_t>(work_.outputs.size(), kMaxKernelOutputs));
    for (uint32_t o = 0; o < args.nOut; ++o) args.out[o] = work_.outputs[o];
  } else {
    args.redop = static_cast<uint32_t>(work_.redop == RedOp::Avg ? RedOp::Sum : work_.redop);
    args.nOut = 1;
    args.out[0] = partial_;
  }
  return args;
}

}  // namespace hc::device::kernels
