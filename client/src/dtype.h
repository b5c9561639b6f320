// The public API's dtypes and operators as the vocabulary's types (common/vocabulary.h), and the
// byte counts of buffer arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/vocabulary.h"
#include "hetero_comm/hc.h"

namespace hc::client {

// hc_dtype_t and hc_redop_t are the vocabulary's values, as ncclDataType_t and ncclRedOp_t are;
// the entry's PreMulSum code follows the built-in operators.
static_assert(HC_INT8 == int(Dtype::Int8) && HC_UINT8 == int(Dtype::Uint8) &&
              HC_INT32 == int(Dtype::Int32) && HC_UINT32 == int(Dtype::Uint32) &&
              HC_INT64 == int(Dtype::Int64) && HC_UINT64 == int(Dtype::Uint64) &&
              HC_FLOAT16 == int(Dtype::Float16) && HC_FLOAT32 == int(Dtype::Float32) &&
              HC_FLOAT64 == int(Dtype::Float64) && HC_BFLOAT16 == int(Dtype::Bfloat16) &&
              HC_FLOAT8E4M3 == int(Dtype::Fp8e4m3) && HC_FLOAT8E5M2 == int(Dtype::Fp8e5m2) &&
              HC_NUM_DTYPES == kNumDtypes);
static_assert(HC_SUM == int(RedOp::Sum) && HC_PROD == int(RedOp::Prod) &&
              HC_MAX == int(RedOp::Max) && HC_MIN == int(RedOp::Min) && HC_AVG == int(RedOp::Avg) &&
              HC_NUM_OPS == int(RedOp::PreMulSum));

// A byte count too large for the address space: the caller reports the overflow.
constexpr uint64_t kBytesOverflow = ~0ull;

// Element size of d; 0 for values outside hc_dtype_t, which the call's checks refuse by name.
constexpr size_t elemSize(int d) {
  const auto dtype = dtypeFrom(d);
  return dtype ? dtypeSize(*dtype) : 0;
}

// count * elemSize(dtype) * times, or kBytesOverflow.
inline uint64_t bytesOf(size_t count, hc_dtype_t dtype, uint64_t times = 1) {
  const auto d = dtypeFrom(dtype);
  if (!d) return 0;
  return hc::bytesOf(count, *d, times).value_or(kBytesOverflow);
}

}  // namespace hc::client
