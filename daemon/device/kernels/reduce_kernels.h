// The GPU reduction kernels: one extern "C" __global__ function per dtype, named
// kReduceKernelNames[dtype] ("hc_reduce_i8" ... "hc_reduce_e5m2"), each taking one ReduceArgs by
// value. reduce_args.h holds the launch contract; reduce_math.h the element math, shared with the
// host check.
//
// Include this from exactly one translation unit of a GPU compiler: daemon/device/cuda/reduce.cu
// (nvcc fatbin) and the HIP backend's source (hipcc code object) both do, so the two vendors run
// the same lines. It uses only __global__ and blockIdx/blockDim/gridDim/threadIdx: nvcc declares
// them itself, while hipcc (HIP 5.x) needs <hip/hip_runtime.h> included before this header, as
// the HIP build's source does. Anything vendor-specific belongs in reduce_math.h behind #if
// guards.
//
// Build without fast-math and without flush-to-zero (bf16 subnormals are fp32 subnormals), and
// without fused multiply-add contraction (nvcc --fmad=false; hipcc -ffp-contract=off): the math
// rounds every step explicitly where it can, and these flags keep the rest from being fused.
#pragma once

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#error "reduce_kernels.h is compiled by nvcc or hipcc; host code includes reduce_args.h"
#endif

#include "daemon/device/kernels/reduce_args.h"
#include "daemon/device/kernels/reduce_math.h"

// A grid-stride loop: thread t of T takes elements t, t + T, t + 2T, ... so any grid size covers
// any count, and consecutive threads touch consecutive elements (coalesced loads and stores).
#define HC_DEFINE_REDUCE_KERNEL(suffix, Element)                                           \
  extern "C" __global__ void hc_reduce_##suffix(hc::device::kernels::ReduceArgs args) {    \
    const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;   \
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;                 \
    hc::device::kernels::reduceStrided<hc::device::kernels::Element>(args, first, stride); \
  }

HC_DEFINE_REDUCE_KERNEL(i8, Int8Element)
HC_DEFINE_REDUCE_KERNEL(u8, Uint8Element)
HC_DEFINE_REDUCE_KERNEL(i32, Int32Element)
HC_DEFINE_REDUCE_KERNEL(u32, Uint32Element)
HC_DEFINE_REDUCE_KERNEL(i64, Int64Element)
HC_DEFINE_REDUCE_KERNEL(u64, Uint64Element)
HC_DEFINE_REDUCE_KERNEL(f16, Fp16Element)
HC_DEFINE_REDUCE_KERNEL(f32, Fp32Element)
HC_DEFINE_REDUCE_KERNEL(f64, Fp64Element)
HC_DEFINE_REDUCE_KERNEL(bf16, Bf16Element)
HC_DEFINE_REDUCE_KERNEL(e4m3, Fp8E4M3Element)
HC_DEFINE_REDUCE_KERNEL(e5m2, Fp8E5M2Element)

#undef HC_DEFINE_REDUCE_KERNEL
