// Element values shared by the tests of the reduction kernels (reduce_math_test.cc, on the host;
// cuda_reduce_test.cc, through the CUDA backend's launch path): dtype facts spelled out
// independently of the code under test, random element bits that cover every class of value, and
// the NaN test that result comparisons use.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/numerics/float_types.h"
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device::kernels::testing {

// ncclDataType_t and ipc::RedOp values, spelled out here rather than taken from the headers.
inline constexpr size_t kElementBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
inline constexpr const char* kDtypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                              "fp16", "fp32",  "fp64",  "bf16",   "e4m3",  "e5m2"};
inline constexpr const char* kRedopNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
inline constexpr uint32_t kDtypes = 12;
inline constexpr uint32_t kRedops = 6;

inline bool isFloat(uint32_t dtype) { return dtype >= 6; }

// Random element bits. Floats mix raw bit patterns (every class of value, specials included) with
// small integers, so that sums both stay finite and overflow.
inline uint64_t randomElement(std::mt19937_64& rng, uint32_t dtype) {
  const uint64_t raw = rng();
  if (!isFloat(dtype) || raw % 4 == 0) return raw;
  const int small = static_cast<int>(rng() % 17) - 8;
  switch (dtype) {
    case kDtypeFloat32:
      return std::bit_cast<uint32_t>(static_cast<float>(small));
    case kDtypeFloat64:
      return std::bit_cast<uint64_t>(static_cast<double>(small));
    case kDtypeFloat16:
      return hc::numerics::Fp16::fromFloat(static_cast<float>(small));
    case kDtypeBfloat16:
      return hc::numerics::Bf16::fromFloat(static_cast<float>(small));
    case kDtypeFp8E4M3:
      return hc::numerics::Fp8E4M3::fromFloat(static_cast<float>(small));
    default:
      return hc::numerics::Fp8E5M2::fromFloat(static_cast<float>(small));
  }
}

inline void storeElement(std::vector<uint8_t>& buffer, uint32_t dtype, size_t i, uint64_t bits) {
  std::memcpy(buffer.data() + i * kElementBytes[dtype], &bits, kElementBytes[dtype]);
}

// The scalar slot holds the element's bytes zero-padded, as the ring entries do.
inline uint64_t scalarSlot(uint32_t dtype, uint64_t bits) {
  const size_t bytes = kElementBytes[dtype];
  return bytes == 8 ? bits : bits & ((uint64_t{1} << (8 * bytes)) - 1);
}

// Whether `bits` encode a NaN of the dtype. NaN results are compared as NaN, not by payload: the
// host's vectorized kernels may take the payload of either NaN operand (x86 returns the first
// operand's, and the compiler may commute an addition), and GPUs return a canonical NaN.
inline bool isNan(uint32_t dtype, uint64_t bits) {
  switch (dtype) {
    case kDtypeFloat16:
      return (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0;
    case kDtypeFloat32:
      return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0;
    case kDtypeFloat64:
      return (bits & 0x7FF0000000000000u) == 0x7FF0000000000000u &&
             (bits & 0x000FFFFFFFFFFFFFu) != 0;
    case kDtypeBfloat16:
      return (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0;
    case kDtypeFp8E4M3:
      return (bits & 0x7F) == 0x7F;
    case kDtypeFp8E5M2:
      return (bits & 0x7C) == 0x7C && (bits & 0x03) != 0;
    default:
      return false;
  }
}

inline std::string hex(uint64_t bits) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(bits));
  return text;
}

}  // namespace hc::device::kernels::testing
