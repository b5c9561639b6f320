// The narrow floating-point formats that reductions read and write: IEEE binary16 (fp16),
// bfloat16, and the OCP 8-bit formats E4M3 (the "FN" variant: no infinities) and E5M2, held as
// plain bit patterns, with their conversions to and from fp32 and the fp32 arithmetic of one
// reduction step (and fp64's rounded add and multiply, for the device kernels). Reductions decode every input to fp32, combine in fp32 and encode the result
// once (DESIGN.md, "Numerics").
//
// Header-only, and written for host and device alike: it includes only <cstdint>, calls no
// library function, and every function is HC_HOST_DEVICE and constexpr (on the host; in CUDA
// device code the fp32 steps use rounding intrinsics), so host kernels and CUDA/HIP kernels share
// one definition and every rank gets the same bits whatever ran it. The
// conversions use integer arithmetic (plus exact int-to-float conversions), so they give the same
// result under any FP rounding mode and with flush-to-zero enabled.
//
// Conversion rules:
// - toFloat is exact for every encoding (each narrow value is an fp32 value), -0 included. A NaN
//   decodes to a quiet fp32 NaN that keeps the sign and the payload bits.
// - fromFloat rounds to nearest, ties to even, into subnormals too; -0 stays -0, and values that
//   round to zero keep their sign.
// - Overflow: fp16 and bf16 give +-infinity, as IEEE 754 does; both fp8 formats saturate to
//   +-(largest finite value) -- 448 for E4M3, 57344 for E5M2 -- and so does an infinite input.
// - Any NaN gives a NaN encoding: fp16, bf16 and E5M2 keep the sign and the top payload bits and
//   set the quiet bit; E4M3 has one NaN per sign, 0x7F and 0xFF.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HC_HOST_DEVICE __host__ __device__
#else
#define HC_HOST_DEVICE
#endif

// The conversions run inside vectorized reduction loops, which a call left out of line would
// keep from vectorizing.
#if defined(__CUDACC__)
#define HC_FORCE_INLINE __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define HC_FORCE_INLINE inline __attribute__((always_inline))
#else
#define HC_FORCE_INLINE inline
#endif

namespace hc::numerics {

// The builtin rather than std::bit_cast: std:: functions are not device functions, and every
// compiler of this project (GCC, Clang/HIP, NVCC) provides it in constant expressions.
HC_HOST_DEVICE constexpr uint32_t floatToBits(float f) { return __builtin_bit_cast(uint32_t, f); }
HC_HOST_DEVICE constexpr float bitsToFloat(uint32_t u) { return __builtin_bit_cast(float, u); }

namespace detail {

constexpr uint32_t kF32MantissaBits = 23;
constexpr uint32_t kF32Bias = 127;
constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Infinity = 0x7F800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;

// x / 2^shift rounded to nearest, ties to even, for 1 <= shift <= 31 and x < 2^31. Larger x
// wrap around (defined for unsigned) and give garbage, which callers compute but never select.
HC_HOST_DEVICE constexpr uint32_t shiftRightRoundEven(uint32_t x, uint32_t shift) {
  const uint32_t halfMinusOne = (1u << (shift - 1)) - 1u;
  const uint32_t lowestKeptBit = (x >> shift) & 1u;
  return (x + halfMinusOne + lowestKeptBit) >> shift;
}

}  // namespace detail

// What the all-ones exponent means.
enum class Specials {
  Ieee,     // infinity (mantissa 0) and NaN (any other mantissa), as IEEE 754
  NanOnly,  // ordinary values, except that an all-ones mantissa is NaN (E4M3FN)
};

// What a finite fp32 value beyond the largest finite value (or an infinity) becomes.
enum class Overflow {
  ToInfinity,  // IEEE 754 round-to-nearest
  Saturate,    // +-largest finite value
};

// A binary floating-point format of 1 sign bit, kExponentBits and kMantissaBits, held in Bits.
template <typename BitsT, uint32_t kExponentBits, uint32_t kMantissaBits, Specials kSpecials,
          Overflow kOverflow>
struct SmallFloat {
  using Bits = BitsT;
  static_assert(1 + kExponentBits + kMantissaBits == 8 * sizeof(Bits));
  static_assert(kExponentBits <= 8 && kMantissaBits < detail::kF32MantissaBits);

  static constexpr uint32_t kWidth = 8 * sizeof(Bits);
  static constexpr uint32_t kBias = (1u << (kExponentBits - 1)) - 1u;
  static constexpr uint32_t kExponentMask = (1u << kExponentBits) - 1u;
  static constexpr uint32_t kMantissaMask = (1u << kMantissaBits) - 1u;
  // Largest finite magnitude: the largest exponent below the all-ones one (Ieee), or the all-ones
  // exponent with every mantissa bit but the lowest (NanOnly: all ones is NaN).
  static constexpr Bits kMaxFiniteBits =
      kSpecials == Specials::Ieee
          ? static_cast<Bits>(((kExponentMask - 1u) << kMantissaBits) | kMantissaMask)
          : static_cast<Bits>((kExponentMask << kMantissaBits) | (kMantissaMask - 1u));
  // +infinity where the format has one, else the positive NaN.
  static constexpr Bits kInfinityBits = static_cast<Bits>(kExponentMask << kMantissaBits);
  static constexpr Bits kQuietNanBits =
      kSpecials == Specials::Ieee
          ? static_cast<Bits>(kInfinityBits | (1u << (kMantissaBits - 1)))
          : static_cast<Bits>((kExponentMask << kMantissaBits) | kMantissaMask);

  // Both conversions compute every case and then select one, without branches: host compilers
  // vectorize them inside the reduction loops, and GPU threads do not diverge. Every case's
  // arithmetic stays defined (unsigned wrap-around, shift counts kept in range) for inputs whose
  // result is not selected.
  HC_HOST_DEVICE HC_FORCE_INLINE static constexpr float toFloat(Bits bits) {
    using namespace detail;
    constexpr uint32_t kShift = kF32MantissaBits - kMantissaBits;
    const uint32_t sign = static_cast<uint32_t>(bits >> (kWidth - 1)) << 31;
    const uint32_t exponent = (static_cast<uint32_t>(bits) >> kMantissaBits) & kExponentMask;
    const uint32_t mantissa = static_cast<uint32_t>(bits) & kMantissaMask;

    // Normal: rebias the exponent and widen the mantissa.
    const uint32_t normal =
        ((exponent + kF32Bias - kBias) << kF32MantissaBits) | (mantissa << kShift);
    // Zero or subnormal: mantissa * 2^(1 - bias - kMantissaBits). bf16 shares fp32's exponent
    // range, so its subnormals are fp32 subnormals with the mantissa in place. For the others the
    // value is an fp32 normal number: the integer converts to fp32 exactly, and lowering its
    // exponent field by bias + kMantissaBits - 1 scales it exactly.
    // (Zero converts to zero bits, and the select tests the converted bits rather than the
    // mantissa so that compilers keep the conversion outside the select and can vectorize it.)
    uint32_t subnormal = mantissa << kShift;
    if constexpr (kBias + kMantissaBits - 1u < kF32Bias) {
      const uint32_t converted = floatToBits(static_cast<float>(static_cast<int32_t>(mantissa)));
      subnormal =
          converted == 0 ? 0u : converted - ((kBias + kMantissaBits - 1u) << kF32MantissaBits);
    }
    // The all-ones exponent. Ieee: infinity, or a NaN made quiet that keeps its payload.
    // NanOnly: one NaN (all-ones mantissa); the other mantissas are normal values.
    uint32_t top;
    if constexpr (kSpecials == Specials::Ieee) {
      top = kF32Infinity | (mantissa << kShift) | (mantissa != 0 ? kF32QuietBit : 0u);
    } else {
      top = mantissa == kMantissaMask ? (kF32Infinity | kF32QuietBit) : normal;
    }
    const uint32_t magnitude =
        exponent == 0 ? subnormal : (exponent == kExponentMask ? top : normal);
    return bitsToFloat(sign | magnitude);
  }

  HC_HOST_DEVICE HC_FORCE_INLINE static constexpr Bits fromFloat(float value) {
    using namespace detail;
    constexpr uint32_t kShift = kF32MantissaBits - kMantissaBits;
    // The fp32 encoding of this format's smallest normal number, 2^(1 - bias).
    constexpr uint32_t kMinNormal = (kF32Bias + 1u - kBias) << kF32MantissaBits;
    const uint32_t u = floatToBits(value);
    const uint32_t sign = (u >> 31) << (kWidth - 1);
    const uint32_t a = u & kF32AbsMask;

    // NaN: Ieee keeps the top payload bits under the quiet bit; NanOnly has a single NaN.
    const uint32_t nan = kSpecials == Specials::Ieee
                             ? kQuietNanBits | ((a >> kShift) & kMantissaMask)
                             : kQuietNanBits;
    // Normal here, or overflowing: rebias the exponent field, then drop kShift mantissa bits with
    // rounding; a carry out of the mantissa correctly bumps the exponent. Infinity lands beyond
    // the largest finite value too, so it takes the overflow rule.
    const uint32_t rounded =
        shiftRightRoundEven(a - ((kF32Bias - kBias) << kF32MantissaBits), kShift);
    constexpr uint32_t kOverflowBits =
        kOverflow == Overflow::Saturate ? kMaxFiniteBits : kInfinityBits;
    const uint32_t normal = rounded > kMaxFiniteBits ? kOverflowBits : rounded;
    // Subnormal here, or zero: the value is significand * 2^(e - 150) and this format's
    // subnormals are multiples of 2^(1 - bias - kMantissaBits), so the encoding is the
    // significand shifted right by 151 - bias - kMantissaBits - e, rounded; rounding up to
    // 2^kMantissaBits gives the smallest normal encoding, which is right. For these inputs
    // 1 <= e <= 127 - bias (fp32 subnormals count as e = 1), so the shift exceeds kShift. Shifts
    // of 25 or more leave less than half a unit, zero, so capping them at 31 changes nothing.
    // e is clamped to that range for every input, which keeps the shift count defined.
    constexpr uint32_t kMaxSubnormalE = kF32Bias - kBias;
    const uint32_t biasedExponent = a >> kF32MantissaBits;
    const uint32_t significand =
        (a & 0x7FFFFFu) | (biasedExponent != 0 ? (1u << kF32MantissaBits) : 0u);
    const uint32_t clamped = biasedExponent > kMaxSubnormalE ? kMaxSubnormalE : biasedExponent;
    const uint32_t e = biasedExponent == 0 ? 1u : clamped;
    const uint32_t shift = kShift + kF32Bias + 1u - kBias - e;
    const uint32_t subnormal = shiftRightRoundEven(significand, shift < 31u ? shift : 31u);

    const uint32_t magnitude = a > kF32Infinity ? nan : (a >= kMinNormal ? normal : subnormal);
    return static_cast<Bits>(sign | magnitude);
  }
};

using Fp16 = SmallFloat<uint16_t, 5, 10, Specials::Ieee, Overflow::ToInfinity>;
using Bf16 = SmallFloat<uint16_t, 8, 7, Specials::Ieee, Overflow::ToInfinity>;
using Fp8E4M3 = SmallFloat<uint8_t, 4, 3, Specials::NanOnly, Overflow::Saturate>;
using Fp8E5M2 = SmallFloat<uint8_t, 5, 2, Specials::Ieee, Overflow::Saturate>;

namespace detail {

// fp32 addition and multiplication, each rounded on its own, even where the compiler would fuse
// a multiply and an add into one FMA (rounded once): NVCC fuses by default and HIP's clang does
// too. CUDA device code uses the explicitly rounded intrinsics; clang honours the pragma (unless
// built with plain -ffp-contract=fast); GCC has no such pragma, so GCC-built code needs
// -ffp-contract=off (the default in ISO C++ mode, which this project builds in; the kernel files
// also set it).
HC_HOST_DEVICE constexpr float addRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a + b;
#endif
}

HC_HOST_DEVICE constexpr float mulRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a * b;
#endif
}

// The fp64 steps, for the fp64 reductions of the device kernels.
HC_HOST_DEVICE constexpr double addRounded(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a + b;
#endif
}

HC_HOST_DEVICE constexpr double mulRounded(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a * b;
#endif
}

}  // namespace detail

// The fp32 arithmetic of one reduction step. Host and device kernels both use these, so that they
// round alike: every step rounds to fp32 (a premulsum step rounds its product, then its sum).
// bf16 subnormals are fp32 subnormals, so kernels must not flush them: build device code without
// flush-to-zero (nvcc's default, unless --use_fast_math or -ftz=true).
HC_HOST_DEVICE constexpr float reduceSum(float acc, float x) { return detail::addRounded(acc, x); }
HC_HOST_DEVICE constexpr float reduceProd(float acc, float x) { return detail::mulRounded(acc, x); }
// The accumulator is kept unless x is strictly greater (smaller): a NaN accumulator stays, a NaN
// x is dropped, and between -0 and +0 the earlier input wins. The fp32 and fp64 kernels behave
// the same.
HC_HOST_DEVICE constexpr float reduceMax(float acc, float x) { return acc < x ? x : acc; }
HC_HOST_DEVICE constexpr float reduceMin(float acc, float x) { return x < acc ? x : acc; }
HC_HOST_DEVICE constexpr float preMultiply(float scalar, float x) {
  return detail::mulRounded(scalar, x);
}
// Avg is the fp32 sum multiplied once by avgFactor(nRanks), as NCCL does for floating-point
// types, and then encoded: two roundings, the same on every rank.
HC_HOST_DEVICE constexpr float avgFactor(uint64_t nRanks) {
  return static_cast<float>(1.0 / static_cast<double>(nRanks));
}
HC_HOST_DEVICE constexpr float applyAvg(float sum, float factor) {
  return detail::mulRounded(sum, factor);
}

}  // namespace hc::numerics
