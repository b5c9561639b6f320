// The launch ABI of the GPU reduction kernels (reduce_kernels.h): kernel names, the one argument
// every kernel takes, and the dtype and operator codes it carries. Host code that launches the
// kernels includes this header alone; it needs no GPU compiler.
//
// Both GPU backends load the same kernels: daemon/device/cuda from an nvcc fatbin,
// daemon/device/hip from a hipcc code object. Whoever launches one must hold to this contract:
// - The kernel for dtype d is the extern "C" symbol kReduceKernelNames[d] ("hc_reduce_f32", ...).
// - It takes one parameter, a ReduceArgs passed by value: kernelParams = { &args } for
//   cuLaunchKernel / hipModuleLaunchKernel (or the same bytes through the "extra" buffer,
//   sizeof(ReduceArgs) = 416, alignment 8; the offsets are asserted below and never change).
// - Any 1-D grid and block work: the kernel is a grid-stride loop over [0, count), so elements
//   beyond gridDim.x * blockDim.x are taken by the same threads on later rounds. No shared memory.
// - in[0, nIn) and out[0, nOut) are device-accessible pointers to `count` elements of the dtype;
//   1 <= nIn <= kMaxKernelInputs, 1 <= nOut <= kMaxKernelOutputs. An output may be an input
//   exactly (in place): every input of an element is read before that element is written.
//   Partial overlap is undefined.
// - redop is an RedOp value (Sum 0, Prod 1, Max 2, Min 3, Avg 4, PreMulSum 5); a value
//   outside that range makes the kernel write nothing. nRanks is Avg's divisor and must be > 0
//   for Avg. scalars[i] is input i's PreMulSum scalar (its bytes in the dtype, little-endian,
//   zero-padded), ignored by the other operators.
// - Entries of in/out/scalars at and beyond nIn/nOut are ignored (zero them).
// The result is bitwise that of the host reduction coll::reduceRange() (reduce_math.h says how),
// except for the payload and sign of NaN results: GPUs return a canonical NaN from arithmetic.
//
// Depends only on <cstdint>/<cstddef>: it is compiled by g++, nvcc and hipcc alike.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hc::device::kernels {

inline constexpr uint32_t kMaxKernelInputs = 16;
inline constexpr uint32_t kMaxKernelOutputs = 16;

// ncclDataType_t values: the index of a dtype's kernel.
enum DtypeCode : uint32_t {
  kDtypeInt8 = 0,
  kDtypeUint8 = 1,
  kDtypeInt32 = 2,
  kDtypeUint32 = 3,
  kDtypeInt64 = 4,
  kDtypeUint64 = 5,
  kDtypeFloat16 = 6,
  kDtypeFloat32 = 7,
  kDtypeFloat64 = 8,
  kDtypeBfloat16 = 9,
  kDtypeFp8E4M3 = 10,
  kDtypeFp8E5M2 = 11,
};
inline constexpr uint32_t kNumKernelDtypes = 12;

// RedOp values.
enum RedopCode : uint32_t {
  kRedopSum = 0,
  kRedopProd = 1,
  kRedopMax = 2,
  kRedopMin = 3,
  kRedopAvg = 4,
  kRedopPreMulSum = 5,
};
inline constexpr uint32_t kNumKernelRedops = 6;

// Indexed by dtype code.
inline constexpr const char* kReduceKernelNames[kNumKernelDtypes] = {
    "hc_reduce_i8",  "hc_reduce_u8",   "hc_reduce_i32",  "hc_reduce_u32",
    "hc_reduce_i64", "hc_reduce_u64",  "hc_reduce_f16",  "hc_reduce_f32",
    "hc_reduce_f64", "hc_reduce_bf16", "hc_reduce_e4m3", "hc_reduce_e5m2"};

struct ReduceArgs {
  const void* in[kMaxKernelInputs];
  void* out[kMaxKernelOutputs];
  uint64_t scalars[kMaxKernelInputs];
  uint32_t nIn, nOut;
  uint64_t count;  // elements
  uint32_t redop;
  uint64_t nRanks;
};

// The layout is the ABI between the hosts that fill ReduceArgs and the device code that reads it,
// built by different compilers: pin it.
static_assert(sizeof(void*) == 8, "the kernel ABI assumes 64-bit pointers");
static_assert(offsetof(ReduceArgs, in) == 0);
static_assert(offsetof(ReduceArgs, out) == 128);
static_assert(offsetof(ReduceArgs, scalars) == 256);
static_assert(offsetof(ReduceArgs, nIn) == 384);
static_assert(offsetof(ReduceArgs, nOut) == 388);
static_assert(offsetof(ReduceArgs, count) == 392);
static_assert(offsetof(ReduceArgs, redop) == 400);
static_assert(offsetof(ReduceArgs, nRanks) == 408);
static_assert(sizeof(ReduceArgs) == 416 && alignof(ReduceArgs) == 8);

}  // namespace hc::device::kernels
