// Element sizes and buffer byte counts of the dtypes the wire knows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hetero_comm/hc.h"

namespace hc::client {

// A byte count too large for the address space: the caller reports the overflow.
constexpr uint64_t kBytesOverflow = ~0ull;

// Element size of d; 0 for values outside hc_dtype_t.
constexpr size_t elemSize(int d) {
  switch (d) {
    case HC_INT8:
    case HC_UINT8:
    case HC_FLOAT8E4M3:
    case HC_FLOAT8E5M2: return 1;
    case HC_FLOAT16:
    case HC_BFLOAT16: return 2;
    case HC_INT32:
    case HC_UINT32:
    case HC_FLOAT32: return 4;
    case HC_INT64:
    case HC_UINT64:
    case HC_FLOAT64: return 8;
    default: return 0;
  }
}

// count * elemSize(dtype) * times, or kBytesOverflow.
inline uint64_t bytesOf(size_t count, hc_dtype_t dtype, uint64_t times = 1) {
  uint64_t b = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), elemSize(dtype), &b)) {
    return kBytesOverflow;
  }
  if (__builtin_mul_overflow(b, times, &b)) return kBytesOverflow;
  return b;
}

}  // namespace hc::client
