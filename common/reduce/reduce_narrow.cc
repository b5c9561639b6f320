// The fp16, bf16, fp8 e4m3 and fp8 e5m2 kernels of reduceRange(): every input element is decoded
// to fp32 and combined in fp32, and each result is encoded once, so the only roundings are those
// of the fp32 steps and the final one (DESIGN.md, "Numerics"). The conversions and the fp32 step
// arithmetic come from common/numerics/float_types.h, which device kernels share, so host and
// device reductions give the same bits.
#include <algorithm>
#include <cstdint>

#include "common/numerics/float_types.h"
#include "common/reduce/chunk_writer.h"
#include "common/reduce/reduce_kernels.h"
#include "common/status.h"

namespace hc::coll {
namespace {

namespace nx = hc::numerics;

// Each operator in fp32: first(x, s) is the accumulator after input 0, combine(acc, x, s) folds in
// the next input. s is the input's PreMulSum scalar, decoded (unused by the others).
struct SumStep {
  static float first(float x, float) { return x; }
  static float combine(float acc, float x, float) { return nx::reduceSum(acc, x); }
};
struct ProdStep {
  static float first(float x, float) { return x; }
  static float combine(float acc, float x, float) { return nx::reduceProd(acc, x); }
};
struct MaxStep {
  static float first(float x, float) { return x; }
  static float combine(float acc, float x, float) { return nx::reduceMax(acc, x); }
};
struct MinStep {
  static float first(float x, float) { return x; }
  static float combine(float acc, float x, float) { return nx::reduceMin(acc, x); }
};
struct PreMulSumStep {
  static float first(float x, float s) { return nx::preMultiply(s, x); }
  static float combine(float acc, float x, float s) {
    return nx::reduceSum(acc, nx::preMultiply(s, x));
  }
};

// Inputs 0 and 1 together: one pass over the accumulator instead of two.
template <typename Format, typename Step>
HC_KERNEL_INLINE void loadFirstTwo(float* __restrict acc, const typename Format::Bits* __restrict a,
                                   const typename Format::Bits* __restrict b, size_t n, float sa,
                                   float sb) {
  for (size_t j = 0; j < n; ++j) {
    acc[j] = Step::combine(Step::first(Format::toFloat(a[j]), sa), Format::toFloat(b[j]), sb);
  }
}

template <typename Format, typename Step>
HC_KERNEL_INLINE void fold(float* __restrict acc, const typename Format::Bits* __restrict x,
                           size_t n, float s) {
  for (size_t j = 0; j < n; ++j) acc[j] = Step::combine(acc[j], Format::toFloat(x[j]), s);
}

// The input's PreMulSum scalar: the low bytes of its slot are the value's encoding.
template <typename Format>
float scalarOf(const ReduceSpec& s, size_t i) {
  if (s.scalars == nullptr) return 0.0f;
  return Format::toFloat(static_cast<typename Format::Bits>(s.scalars[i]));
}

// As the wide kernels: per chunk, the inputs before the last are combined into acc (fp32) in
// order, and the last one is folded in as each result is encoded (after avg's one multiplication)
// and stored.
template <typename Format, typename Step, bool kAvg>
HC_CHUNK_CLONES void reduceNarrowTyped(const ReduceSpec& s, size_t begin, size_t end) {
  using Bits = typename Format::Bits;
  constexpr size_t kElems = kChunkBytes / sizeof(float);
  alignas(64) float acc[kElems];
  alignas(64) Bits tail[kElems];
  const ChunkWriter writer(s.outputs, s.nOutputs, s.inputs, s.nInputs,
                           (end - begin) * sizeof(Bits));
  const float avgFactor = kAvg ? nx::avgFactor(s.nRanks) : 1.0f;
  const auto encode = [avgFactor](float v) HC_KERNEL_LAMBDA_INLINE {
    return Format::fromFloat(kAvg ? nx::applyAvg(v, avgFactor) : v);
  };
  const size_t last = s.nInputs - 1;
  const float lastScalar = scalarOf<Format>(s, last);
  for (size_t b = begin; b < end; b += kElems) {
    const size_t n = std::min(kElems, end - b);
    auto in = [&](size_t i) { return static_cast<const Bits*>(s.inputs[i]) + b; };
    const Bits* __restrict x = in(last);
    // Every input of an element is read before the element is stored, so storing into an input
    // (in place) is safe.
    if (s.nInputs == 1) {
      storeChunkResults(writer, b, n, tail, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return encode(Step::first(Format::toFloat(x[j]), lastScalar));
      });
    } else if (s.nInputs == 2) {
      const Bits* __restrict a = in(0);
      const float s0 = scalarOf<Format>(s, 0);
      storeChunkResults(writer, b, n, tail, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return encode(Step::combine(Step::first(Format::toFloat(a[j]), s0), Format::toFloat(x[j]),
                                    lastScalar));
      });
    } else {
      loadFirstTwo<Format, Step>(acc, in(0), in(1), n, scalarOf<Format>(s, 0),
                                 scalarOf<Format>(s, 1));
      for (size_t i = 2; i < last; ++i) {
        fold<Format, Step>(acc, in(i), n, scalarOf<Format>(s, i));
      }
      storeChunkResults(writer, b, n, tail, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return encode(Step::combine(acc[j], Format::toFloat(x[j]), lastScalar));
      });
    }
  }
  writer.finish();
}

template <typename Format>
void reduceNarrowAs(const ReduceSpec& s, size_t begin, size_t end) {
  switch (s.redop) {
    case RedOp::Sum:
      return reduceNarrowTyped<Format, SumStep, false>(s, begin, end);
    case RedOp::Prod:
      return reduceNarrowTyped<Format, ProdStep, false>(s, begin, end);
    case RedOp::Max:
      return reduceNarrowTyped<Format, MaxStep, false>(s, begin, end);
    case RedOp::Min:
      return reduceNarrowTyped<Format, MinStep, false>(s, begin, end);
    case RedOp::Avg:
      return reduceNarrowTyped<Format, SumStep, true>(s, begin, end);
    case RedOp::PreMulSum:
      return reduceNarrowTyped<Format, PreMulSumStep, false>(s, begin, end);
  }
}

}  // namespace

void reduceNarrowRange(const ReduceSpec& spec, size_t begin, size_t end) {
  switch (spec.dtype) {
    case Dtype::Float16:
      return reduceNarrowAs<nx::Fp16>(spec, begin, end);
    case Dtype::Bfloat16:
      return reduceNarrowAs<nx::Bf16>(spec, begin, end);
    case Dtype::Fp8e4m3:
      return reduceNarrowAs<nx::Fp8E4M3>(spec, begin, end);
    case Dtype::Fp8e5m2:
      return reduceNarrowAs<nx::Fp8E5M2>(spec, begin, end);
    default:
      HC_CHECK(isNarrowFloat(spec.dtype) && "the caller dispatched a narrow float");
  }
}

}  // namespace hc::coll
