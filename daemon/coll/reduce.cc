#include "daemon/coll/reduce.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/ipc/protocol.h"

// The chunk kernels are built for AVX2 and for the baseline, and the loader picks one per
// machine. Both give the same bits: the file is compiled with -ffp-contract=off, so neither
// clone fuses a multiply and an add that the other rounds twice.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define HC_CHUNK_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef HC_CHUNK_CLONES
#define HC_CHUNK_CLONES
#endif

namespace hc::coll {
namespace {

// ncclDataType_t values.
enum Dtype : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFp8e4m3 = 10,
  kFp8e5m2 = 11,
};
constexpr uint8_t kNumDtypes = 12;

// Per buffer and chunk: the accumulator stays in L1 while every input streams through once.
constexpr size_t kChunkBytes = 16 * 1024;

// Indexed by dtype value.
constexpr size_t kDtypeSizes[kNumDtypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
constexpr const char* kDtypeNames[kNumDtypes] = {"int8",    "uint8",    "int32",    "uint32",
                                                 "int64",   "uint64",   "float16",  "float32",
                                                 "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
// Indexed by ipc::RedOp value.
constexpr const char* kRedopNames[ipc::kNumRedOps] = {"sum", "prod", "max",
                                                      "min", "avg",  "premulsum"};

// The 16-bit and 8-bit floats need an fp32 accumulator and rounding rules of their own.
bool implemented(uint8_t dtype) {
  return dtype < kNumDtypes && dtype != kFloat16 && dtype != kBfloat16 && dtype != kFp8e4m3 &&
         dtype != kFp8e5m2;
}

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

template <typename C, typename Op>
inline void loadFirst(C* __restrict acc, const C* __restrict a, size_t n, C sa) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::first(a[j], sa);
}

// Inputs 0 and 1 together: one pass over the accumulator instead of two.
template <typename C, typename Op>
inline void loadFirstTwo(C* __restrict acc, const C* __restrict a, const C* __restrict b, size_t n,
                         C sa, C sb) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::combine(Op::first(a[j], sa), b[j], sb);
}

template <typename C, typename Op>
inline void fold(C* __restrict acc, const C* __restrict x, size_t n, C s) {
  for (size_t j = 0; j < n; ++j) acc[j] = Op::combine(acc[j], x[j], s);
}

// Avg after the sum, as NCCL does: floats multiply once by 1/n, integers divide truncating in
// their own signedness (the wrapped sum is read back as T).
template <typename T, typename C>
inline void divide(C* __restrict acc, size_t n, size_t nRanks) {
  if constexpr (std::is_floating_point_v<T>) {
    const T inv = static_cast<T>(1.0 / static_cast<double>(nRanks));
    for (size_t j = 0; j < n; ++j) acc[j] = acc[j] * inv;
  } else if constexpr (std::is_signed_v<T>) {
    const int64_t d = static_cast<int64_t>(nRanks);
    for (size_t j = 0; j < n; ++j) {
      acc[j] = static_cast<C>(static_cast<int64_t>(static_cast<T>(acc[j])) / d);
    }
  } else {
    const uint64_t d = nRanks;
    for (size_t j = 0; j < n; ++j) acc[j] = static_cast<C>(static_cast<uint64_t>(acc[j]) / d);
  }
}

// T is the dtype, C the type the buffers are read and combined as (WrapType<T> or T).
template <typename T, typename C, template <typename> class Op, bool kAvg>
HC_CHUNK_CLONES void reduceTyped(const ReduceSpec& s, size_t begin, size_t end) {
  constexpr size_t kElems = kChunkBytes / sizeof(C);
  alignas(64) C acc[kElems];
  for (size_t b = begin; b < end; b += kElems) {
    const size_t n = std::min(kElems, end - b);
    auto in = [&](size_t i) { return static_cast<const C*>(s.inputs[i]) + b; };
    if (s.nInputs == 1) {
      loadFirst<C, Op<C>>(acc, in(0), n, scalarAs<C>(s.scalars, 0));
    } else {
      loadFirstTwo<C, Op<C>>(acc, in(0), in(1), n, scalarAs<C>(s.scalars, 0),
                             scalarAs<C>(s.scalars, 1));
    }
    for (size_t i = 2; i < s.nInputs; ++i) fold<C, Op<C>>(acc, in(i), n, scalarAs<C>(s.scalars, i));
    if constexpr (kAvg) divide<T, C>(acc, n, s.nRanks);
    // Every input of this chunk has been read, so storing into an input (in place) is safe.
    for (size_t o = 0; o < s.nOutputs; ++o) {
      std::memcpy(static_cast<C*>(s.outputs[o]) + b, acc, n * sizeof(C));
    }
  }
}

template <typename T>
void reduceAs(const ReduceSpec& s, size_t begin, size_t end) {
  using U = WrapType<T>;
  switch (static_cast<ipc::RedOp>(s.redop)) {
    case ipc::RedOp::Sum:
      return reduceTyped<T, U, SumOp, false>(s, begin, end);
    case ipc::RedOp::Prod:
      return reduceTyped<T, U, ProdOp, false>(s, begin, end);
    case ipc::RedOp::Max:
      return reduceTyped<T, T, MaxOp, false>(s, begin, end);
    case ipc::RedOp::Min:
      return reduceTyped<T, T, MinOp, false>(s, begin, end);
    case ipc::RedOp::Avg:
      return reduceTyped<T, U, SumOp, true>(s, begin, end);
    case ipc::RedOp::PreMulSum:
      return reduceTyped<T, U, PreMulSumOp, false>(s, begin, end);
  }
  HC_CHECK(s.redop < ipc::kNumRedOps);
}

}  // namespace

hc::Status checkDtype(uint8_t dtype) {
  if (dtype >= kNumDtypes) return invalidArgument("unknown dtype " + std::to_string(dtype));
  if (!implemented(dtype)) {
    return invalidArgument(std::string("dtype ") + dtypeName(dtype) + " is not supported yet");
  }
  return okStatus();
}

hc::Status checkReduction(uint8_t dtype, uint8_t redop) {
  HC_RETURN_IF_ERROR(checkDtype(dtype));
  if (redop >= ipc::kNumRedOps) {
    return invalidArgument("unknown reduction operator " + std::to_string(redop));
  }
  return okStatus();
}

size_t dtypeSize(uint8_t dtype) { return dtype < kNumDtypes ? kDtypeSizes[dtype] : 0; }

const char* dtypeName(uint8_t dtype) { return dtype < kNumDtypes ? kDtypeNames[dtype] : "unknown"; }

const char* redopName(uint8_t redop) {
  return redop < ipc::kNumRedOps ? kRedopNames[redop] : "unknown";
}

void reduceRange(const ReduceSpec& spec, size_t begin, size_t end) {
  if (begin >= end) return;
  HC_CHECK(spec.nInputs > 0);
  HC_CHECK(spec.redop != static_cast<uint8_t>(ipc::RedOp::PreMulSum) || spec.scalars != nullptr);
  HC_CHECK(spec.redop != static_cast<uint8_t>(ipc::RedOp::Avg) || spec.nRanks > 0);
  switch (spec.dtype) {
    case kInt8:
      return reduceAs<int8_t>(spec, begin, end);
    case kUint8:
      return reduceAs<uint8_t>(spec, begin, end);
    case kInt32:
      return reduceAs<int32_t>(spec, begin, end);
    case kUint32:
      return reduceAs<uint32_t>(spec, begin, end);
    case kInt64:
      return reduceAs<int64_t>(spec, begin, end);
    case kUint64:
      return reduceAs<uint64_t>(spec, begin, end);
    case kFloat32:
      return reduceAs<float>(spec, begin, end);
    case kFloat64:
      return reduceAs<double>(spec, begin, end);
    default:
      HC_CHECK(implemented(spec.dtype) && "checkReduction() accepted this dtype");
  }
}

void copyRange(const void* src, void* const* outputs, size_t nOutputs, size_t begin, size_t end) {
  if (begin >= end) return;
  const auto* from = static_cast<const uint8_t*>(src);
  size_t targets = 0;
  for (size_t o = 0; o < nOutputs; ++o) targets += outputs[o] != src;
  if (targets <= 1) {
    // One destination: a single memcpy lets libc pick its large-copy strategy.
    for (size_t o = 0; o < nOutputs; ++o) {
      if (outputs[o] != src) {
        std::memcpy(static_cast<uint8_t*>(outputs[o]) + begin, from + begin, end - begin);
      }
    }
    return;
  }
  // Several destinations: chunk by chunk, so src is read from memory once and from cache after.
  for (size_t b = begin; b < end; b += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, end - b);
    for (size_t o = 0; o < nOutputs; ++o) {
      if (outputs[o] != src) std::memcpy(static_cast<uint8_t*>(outputs[o]) + b, from + b, n);
    }
  }
}

}  // namespace hc::coll
