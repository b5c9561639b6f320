// The element-wise math of the GPU reduction kernels, for every dtype and operator, written once
// for host and device (HC_HOST_DEVICE) so that g++ can check it against the host reduction and
// nvcc and hipcc compile the same lines into kernels.
//
// It reproduces coll::reduceRange() (common/reduce/reduce.cc, reduce_narrow.cc) operation for
// operation, so that results match bitwise:
// - Inputs are folded in rank order: acc = first(x0, s0), then acc = combine(acc, xi, si).
// - Integers: sum, prod and premulsum wrap modulo 2^bits (computed unsigned); max and min compare
//   in the dtype's own signedness; avg sums (wrapping), then divides truncating, as int64 for
//   signed dtypes and uint64 for unsigned ones.
// - fp32 and fp64: each step rounds to the dtype, and a multiply is never fused with an add
//   (explicitly rounded intrinsics on CUDA devices, `fp contract(off)` under clang, and GCC's ISO
//   mode default elsewhere); avg multiplies the sum once by (T)(1.0 / nRanks); premulsum adds
//   scalar * x, the product rounded first.
// - fp16, bf16, fp8 e4m3 and e5m2: every input is decoded to fp32, combined in fp32 as above over
//   ALL inputs, and encoded once (common/numerics/float_types.h: round to nearest even, fp16/bf16
//   overflow to infinity, fp8 saturates, NaN stays NaN).
// - max keeps the accumulator unless x is strictly greater (min: strictly smaller): a NaN already
//   in the accumulator stays, a NaN input after the first is dropped, and of -0 and +0 the earlier
//   wins.
// NaN results are NaN everywhere, but their payload and sign are not portable: GPU arithmetic
// returns a canonical NaN where x86 propagates an operand's.
//
// Depends on <cstdint> and common/numerics/float_types.h only (no standard library functions in
// device code).
#pragma once

#include <cstdint>

#include "common/numerics/float_types.h"
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device::kernels {

namespace detail {

template <bool kCondition, typename IfTrue, typename IfFalse>
struct Select {
  using Type = IfTrue;
};
template <typename IfTrue, typename IfFalse>
struct Select<false, IfTrue, IfFalse> {
  using Type = IfFalse;
};

}  // namespace detail

// An element type: how a stored value becomes an accumulator and back, and the arithmetic of one
// step. Storage is the dtype's bits in memory, Acc what a step computes in, AvgFactor what avg
// needs (computed once per launch, not per element).

// Integers are accumulated as themselves; sums and products go through the unsigned type U, which
// wraps without undefined behaviour and gives the bits of the signed wrap.
template <typename T, typename U>
struct IntegerElement {
  using Storage = T;
  using Acc = T;
  using AvgFactor = uint64_t;
  // Types narrower than unsigned int promote to int, whose product can overflow: widen them to
  // unsigned int instead.
  using Wide = typename detail::Select<(sizeof(U) < sizeof(unsigned)), unsigned, U>::Type;

  HC_HOST_DEVICE HC_FORCE_INLINE static Acc load(Storage v) { return v; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Storage store(Acc v) { return v; }
  // The scalar's low sizeof(T) bytes.
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc scalar(uint64_t bits) {
    return static_cast<T>(static_cast<U>(bits));
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc add(Acc a, Acc b) {
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc mul(Acc a, Acc b) {
    return static_cast<T>(static_cast<U>(static_cast<Wide>(static_cast<U>(a)) *
                                         static_cast<Wide>(static_cast<U>(b))));
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc max(Acc acc, Acc x) { return acc < x ? x : acc; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc min(Acc acc, Acc x) { return x < acc ? x : acc; }
  HC_HOST_DEVICE HC_FORCE_INLINE static AvgFactor avgFactor(uint64_t nRanks) { return nRanks; }
  // Truncating division in the dtype's signedness, as NCCL does for integers.
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc average(Acc sum, AvgFactor nRanks) {
    if constexpr (static_cast<T>(-1) < static_cast<T>(0)) {
      return static_cast<T>(static_cast<int64_t>(sum) / static_cast<int64_t>(nRanks));
    } else {
      return static_cast<T>(static_cast<uint64_t>(sum) / nRanks);
    }
  }
};

// fp32, and the fp32 arithmetic of the narrow floats.
struct Fp32Math {
  using Acc = float;
  using AvgFactor = float;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc add(Acc a, Acc b) {
    return hc::numerics::reduceSum(a, b);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc mul(Acc a, Acc b) {
    return hc::numerics::reduceProd(a, b);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc max(Acc acc, Acc x) {
    return hc::numerics::reduceMax(acc, x);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc min(Acc acc, Acc x) {
    return hc::numerics::reduceMin(acc, x);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static AvgFactor avgFactor(uint64_t nRanks) {
    return hc::numerics::avgFactor(nRanks);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc average(Acc sum, AvgFactor factor) {
    return hc::numerics::applyAvg(sum, factor);
  }
};

struct Fp32Element : Fp32Math {
  using Storage = float;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc load(Storage v) { return v; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Storage store(Acc v) { return v; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc scalar(uint64_t bits) {
    return hc::numerics::bitsToFloat(static_cast<uint32_t>(bits));
  }
};

// fp16, bf16 and fp8: decoded to fp32 on load, encoded once on store.
template <typename Format>
struct NarrowFloatElement : Fp32Math {
  using Storage = typename Format::Bits;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc load(Storage v) { return Format::toFloat(v); }
  HC_HOST_DEVICE HC_FORCE_INLINE static Storage store(Acc v) { return Format::fromFloat(v); }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc scalar(uint64_t bits) {
    return Format::toFloat(static_cast<Storage>(bits));
  }
};

struct Fp64Element {
  using Storage = double;
  using Acc = double;
  using AvgFactor = double;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc load(Storage v) { return v; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Storage store(Acc v) { return v; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc scalar(uint64_t bits) {
    return __builtin_bit_cast(double, bits);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc add(Acc a, Acc b) {
    return numerics::detail::addRounded(a, b);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc mul(Acc a, Acc b) {
    return numerics::detail::mulRounded(a, b);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc max(Acc acc, Acc x) { return acc < x ? x : acc; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc min(Acc acc, Acc x) { return x < acc ? x : acc; }
  HC_HOST_DEVICE HC_FORCE_INLINE static AvgFactor avgFactor(uint64_t nRanks) {
    return 1.0 / static_cast<double>(nRanks);
  }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc average(Acc sum, AvgFactor factor) {
    return numerics::detail::mulRounded(sum, factor);
  }
};

using Int8Element = IntegerElement<int8_t, uint8_t>;
using Uint8Element = IntegerElement<uint8_t, uint8_t>;
using Int32Element = IntegerElement<int32_t, uint32_t>;
using Uint32Element = IntegerElement<uint32_t, uint32_t>;
using Int64Element = IntegerElement<int64_t, uint64_t>;
using Uint64Element = IntegerElement<uint64_t, uint64_t>;
using Fp16Element = NarrowFloatElement<hc::numerics::Fp16>;
using Bf16Element = NarrowFloatElement<hc::numerics::Bf16>;
using Fp8E4M3Element = NarrowFloatElement<hc::numerics::Fp8E4M3>;
using Fp8E5M2Element = NarrowFloatElement<hc::numerics::Fp8E5M2>;

// The operators: first(x, s) is the accumulator after input 0, combine(acc, x, s) folds in the
// next input; s is that input's PreMulSum scalar, decoded (the others ignore it, and inlining
// drops its decoding).
template <typename E>
struct SumStep {
  using Acc = typename E::Acc;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc first(Acc x, Acc) { return x; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc combine(Acc acc, Acc x, Acc) { return E::add(acc, x); }
};
template <typename E>
struct ProdStep {
  using Acc = typename E::Acc;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc first(Acc x, Acc) { return x; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc combine(Acc acc, Acc x, Acc) { return E::mul(acc, x); }
};
template <typename E>
struct MaxStep {
  using Acc = typename E::Acc;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc first(Acc x, Acc) { return x; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc combine(Acc acc, Acc x, Acc) { return E::max(acc, x); }
};
template <typename E>
struct MinStep {
  using Acc = typename E::Acc;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc first(Acc x, Acc) { return x; }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc combine(Acc acc, Acc x, Acc) { return E::min(acc, x); }
};
// scalar * x, with the scalar on the left as the host computes it.
template <typename E>
struct PreMulSumStep {
  using Acc = typename E::Acc;
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc first(Acc x, Acc s) { return E::mul(s, x); }
  HC_HOST_DEVICE HC_FORCE_INLINE static Acc combine(Acc acc, Acc x, Acc s) {
    return E::add(acc, E::mul(s, x));
  }
};

// Reduces elements first, first + stride, ... (below args.count) of every input into every
// output. A GPU thread passes its global index and the grid's thread count; the host passes 0, 1.
template <typename E, typename Step, bool kAvg>
HC_HOST_DEVICE HC_FORCE_INLINE void reduceElements(const ReduceArgs& args, uint64_t first,
                                                   uint64_t stride) {
  using Storage = typename E::Storage;
  using Acc = typename E::Acc;
  const uint32_t nIn = args.nIn;
  const uint32_t nOut = args.nOut;
  const typename E::AvgFactor factor = kAvg ? E::avgFactor(args.nRanks) : typename E::AvgFactor{};
  for (uint64_t i = first; i < args.count; i += stride) {
    Acc acc = Step::first(E::load(static_cast<const Storage*>(args.in[0])[i]),
                          E::scalar(args.scalars[0]));
    for (uint32_t k = 1; k < nIn; ++k) {
      acc = Step::combine(acc, E::load(static_cast<const Storage*>(args.in[k])[i]),
                          E::scalar(args.scalars[k]));
    }
    if constexpr (kAvg) acc = E::average(acc, factor);
    // Every input of element i was read above, so an output that is an input is safe to store.
    const Storage result = E::store(acc);
    for (uint32_t o = 0; o < nOut; ++o) static_cast<Storage*>(args.out[o])[i] = result;
  }
}

// One dtype's reduction, by operator. An unknown operator writes nothing (launchers validate).
template <typename E>
HC_HOST_DEVICE void reduceStrided(const ReduceArgs& args, uint64_t first, uint64_t stride) {
  if (args.nIn == 0 || args.nIn > kMaxKernelInputs || args.nOut > kMaxKernelOutputs) return;
  switch (args.redop) {
    case kRedopSum:
      return reduceElements<E, SumStep<E>, false>(args, first, stride);
    case kRedopProd:
      return reduceElements<E, ProdStep<E>, false>(args, first, stride);
    case kRedopMax:
      return reduceElements<E, MaxStep<E>, false>(args, first, stride);
    case kRedopMin:
      return reduceElements<E, MinStep<E>, false>(args, first, stride);
    case kRedopAvg:
      return reduceElements<E, SumStep<E>, true>(args, first, stride);
    case kRedopPreMulSum:
      return reduceElements<E, PreMulSumStep<E>, false>(args, first, stride);
    default:
      return;
  }
}

// The same, by dtype code: false (and nothing written) for an unknown dtype. The kernels call
// reduceStrided<E> directly, one symbol per dtype; host code (tests, emulators) uses this.
HC_HOST_DEVICE inline bool reduceStridedByDtype(uint32_t dtype, const ReduceArgs& args,
                                                uint64_t first, uint64_t stride) {
  switch (dtype) {
    case kDtypeInt8:
      reduceStrided<Int8Element>(args, first, stride);
      return true;
    case kDtypeUint8:
      reduceStrided<Uint8Element>(args, first, stride);
      return true;
    case kDtypeInt32:
      reduceStrided<Int32Element>(args, first, stride);
      return true;
    case kDtypeUint32:
      reduceStrided<Uint32Element>(args, first, stride);
      return true;
    case kDtypeInt64:
      reduceStrided<Int64Element>(args, first, stride);
      return true;
    case kDtypeUint64:
      reduceStrided<Uint64Element>(args, first, stride);
      return true;
    case kDtypeFloat16:
      reduceStrided<Fp16Element>(args, first, stride);
      return true;
    case kDtypeFloat32:
      reduceStrided<Fp32Element>(args, first, stride);
      return true;
    case kDtypeFloat64:
      reduceStrided<Fp64Element>(args, first, stride);
      return true;
    case kDtypeBfloat16:
      reduceStrided<Bf16Element>(args, first, stride);
      return true;
    case kDtypeFp8E4M3:
      reduceStrided<Fp8E4M3Element>(args, first, stride);
      return true;
    case kDtypeFp8E5M2:
      reduceStrided<Fp8E5M2Element>(args, first, stride);
      return true;
    default:
      return false;
  }
}

}  // namespace hc::device::kernels
