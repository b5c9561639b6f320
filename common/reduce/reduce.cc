#include "common/reduce/reduce.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/reduce/chunk_writer.h"
#include "common/reduce/reduce_kernels.h"

namespace hc::coll {
namespace {

// Integer sums and products are computed in the unsigned type: they wrap modulo 2^bits, with no
// undefined behaviour, and the bits equal those of the signed wrap.
template <typename T>
using WrapType = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                             std::type_identity<T>>::type;

// Unsigned types narrower than int promote to int, whose product can overflow; widen them to
// unsigned instead.
template <typename C>
using MulType =
    std::conditional_t<std::is_integral_v<C> && sizeof(C) < sizeof(unsigned), unsigned, C>;

template <typename C>
C mul(C a, C b) {
  return static_cast<C>(static_cast<MulType<C>>(a) * static_cast<MulType<C>>(b));
}

// Each operator: first(x, s) is the accumulator after input 0, combine(acc, x, s) folds in the
// next input. s is the input's PreMulSum scalar (unused by the others).
template <typename C>
struct SumOp {
  static C first(C x, C) { return x; }
  static C combine(C a, C x, C) { return static_cast<C>(a + x); }
};
template <typename C>
struct ProdOp {
  static C first(C x, C) { return x; }
  static C combine(C a, C x, C) { return mul(a, x); }
};
template <typename C>
struct MaxOp {
  static C first(C x, C) { return x; }
  static C combine(C a, C x, C) { return a < x ? x : a; }
};
template <typename C>
struct MinOp {
  static C first(C x, C) { return x; }
  static C combine(C a, C x, C) { return x < a ? x : a; }
};
template <typename C>
struct PreMulSumOp {
  static C first(C x, C s) { return mul(s, x); }
  static C combine(C a, C x, C s) { return static_cast<C>(a + mul(s, x)); }
};

// The scalar's value: its low sizeof(C) bytes, as the value of the dtype.
template <typename C>
C scalarAs(const uint64_t* scalars, size_t i) {
  if (scalars == nullptr) return C{};
  using Bits = std::conditional_t<
      sizeof(C) == 1, uint8_t,
      std::conditional_t<sizeof(C) == 2, uint16_t,
                         std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>>>;
  return std::bit_cast<C>(static_cast<Bits>(scalars[i]));
}

// Inputs 0 and 1 together: one pass over the accumulator instead of two.
template <typename C, typename Op>
HC_KERNEL_INLINE void loadFirstTwo(C* __restrict acc, const C* __restrict a, const C* __restrict b,
                                   size_t n, C sa, C sb) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::combine(Op::first(a[j], sa), b[j], sb);
}

template <typename C, typename Op>
HC_KERNEL_INLINE void fold(C* __restrict acc, const C* __restrict x, size_t n, C s) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::combine(acc[j], x[j], s);
}

// What becomes of a finished sum: nothing, or avg's division.
template <typename C>
struct Unchanged {
  C operator()(C v) const { return v; }
};

// Avg after the sum, as NCCL does: floats multiply once by 1/n, integers divide truncating in
// their own signedness (the wrapped sum is read back as T).
template <typename T, typename C>
struct AvgOf {
  explicit AvgOf(size_t nRanks)
      : inverse(static_cast<C>(static_cast<T>(1.0 / static_cast<double>(nRanks)))),
        divisor(nRanks) {}
  C operator()(C sum) const {
    if constexpr (std::is_floating_point_v<T>) {
      return sum * inverse;
    } else if constexpr (std::is_signed_v<T>) {
      return static_cast<C>(static_cast<int64_t>(static_cast<T>(sum)) /
                            static_cast<int64_t>(divisor));
    } else {
      return static_cast<C>(static_cast<uint64_t>(sum) / divisor);
    }
  }
  C inverse;  // floats only
  uint64_t divisor;
};

// T is the dtype, C the type the buffers are read and combined as (WrapType<T> or T). Per chunk,
// the inputs before the last are combined into acc in order; the last one is folded in as the
// results are stored (storeChunkResults), so with two inputs the chunk is one pass.
template <typename T, typename C, template <typename> class Op, bool kAvg>
HC_CHUNK_CLONES void reduceTyped(const ReduceSpec& s, size_t begin, size_t end) {
  using O = Op<C>;
  constexpr size_t kElems = kChunkBytes / sizeof(C);
  alignas(64) C acc[kElems];
  const ChunkWriter writer(s.outputs, s.nOutputs, s.inputs, s.nInputs, (end - begin) * sizeof(C));
  const auto finish = [&] {
    if constexpr (kAvg) {
      return AvgOf<T, C>(s.nRanks);
    } else {
      return Unchanged<C>();
    }
  }();
  const size_t last = s.nInputs - 1;
  const C lastScalar = scalarAs<C>(s.scalars, last);
  for (size_t b = begin; b < end; b += kElems) {
    const size_t n = std::min(kElems, end - b);
    auto in = [&](size_t i) { return static_cast<const C*>(s.inputs[i]) + b; };
    const C* __restrict x = in(last);
    // Every input of an element is read before the element is stored, so storing into an input
    // (in place) is safe.
    if (s.nInputs == 1) {
      storeChunkResults(writer, b, n, acc, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return finish(O::first(x[j], lastScalar));
      });
    } else if (s.nInputs == 2) {
      const C* __restrict a = in(0);
      const C s0 = scalarAs<C>(s.scalars, 0);
      storeChunkResults(writer, b, n, acc, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return finish(O::combine(O::first(a[j], s0), x[j], lastScalar));
      });
    } else {
      loadFirstTwo<C, O>(acc, in(0), in(1), n, scalarAs<C>(s.scalars, 0),
                         scalarAs<C>(s.scalars, 1));
      for (size_t i = 2; i < last; ++i) fold<C, O>(acc, in(i), n, scalarAs<C>(s.scalars, i));
      storeChunkResults(writer, b, n, acc, [&](size_t j) HC_KERNEL_LAMBDA_INLINE {
        return finish(O::combine(acc[j], x[j], lastScalar));
      });
    }
  }
  writer.finish();
}

template <typename T>
void reduceAs(const ReduceSpec& s, size_t begin, size_t end) {
  using U = WrapType<T>;
  switch (s.redop) {
    case RedOp::Sum:
      return reduceTyped<T, U, SumOp, false>(s, begin, end);
    case RedOp::Prod:
      return reduceTyped<T, U, ProdOp, false>(s, begin, end);
    case RedOp::Max:
      return reduceTyped<T, T, MaxOp, false>(s, begin, end);
    case RedOp::Min:
      return reduceTyped<T, T, MinOp, false>(s, begin, end);
    case RedOp::Avg:
      return reduceTyped<T, U, SumOp, true>(s, begin, end);
    case RedOp::PreMulSum:
      return reduceTyped<T, U, PreMulSumOp, false>(s, begin, end);
  }
}

}  // namespace

void reduceRange(const ReduceSpec& spec, size_t begin, size_t end) {
  if (begin >= end) return;
  HC_CHECK(spec.nInputs > 0);
  HC_CHECK(spec.redop != RedOp::PreMulSum || spec.scalars != nullptr);
  HC_CHECK(spec.redop != RedOp::Avg || spec.nRanks > 0);
  switch (spec.dtype) {
    case Dtype::Int8:
      return reduceAs<int8_t>(spec, begin, end);
    case Dtype::Uint8:
      return reduceAs<uint8_t>(spec, begin, end);
    case Dtype::Int32:
      return reduceAs<int32_t>(spec, begin, end);
    case Dtype::Uint32:
      return reduceAs<uint32_t>(spec, begin, end);
    case Dtype::Int64:
      return reduceAs<int64_t>(spec, begin, end);
    case Dtype::Uint64:
      return reduceAs<uint64_t>(spec, begin, end);
    case Dtype::Float32:
      return reduceAs<float>(spec, begin, end);
    case Dtype::Float64:
      return reduceAs<double>(spec, begin, end);
    case Dtype::Float16:
    case Dtype::Bfloat16:
    case Dtype::Fp8e4m3:
    case Dtype::Fp8e5m2:
      return reduceNarrowRange(spec, begin, end);
  }
}

void copyRange(const void* src, void* const* outputs, size_t nOutputs, size_t begin, size_t end) {
  if (begin >= end) return;
  const auto* from = static_cast<const uint8_t*>(src);
  const size_t bytes = end - begin;
  // No output aliases src but the skipped ones, so every target of a large range streams.
  const bool stream = bytes >= kStreamingMinBytes;
  size_t targets = 0;
  for (size_t o = 0; o < nOutputs; ++o) targets += outputs[o] != src;
  if (targets <= 1) {
    // One destination: one pass over the whole range.
    for (size_t o = 0; o < nOutputs; ++o) {
      if (outputs[o] == src) continue;
      uint8_t* to = static_cast<uint8_t*>(outputs[o]) + begin;
      if (stream) {
        streamBytes(to, from + begin, bytes);
      } else {
        std::memcpy(to, from + begin, bytes);
      }
    }
  } else {
    // Several destinations: chunk by chunk, so src is read from memory once and from cache after.
    for (size_t b = begin; b < end; b += kChunkBytes) {
      const size_t n = std::min(kChunkBytes, end - b);
      for (size_t o = 0; o < nOutputs; ++o) {
        if (outputs[o] == src) continue;
        uint8_t* to = static_cast<uint8_t*>(outputs[o]) + b;
        if (stream) {
          streamBytes(to, from + b, n);
        } else {
          std::memcpy(to, from + b, n);
        }
      }
    }
  }
  if (stream) fenceStreamingStores();
}

}  // namespace hc::coll
