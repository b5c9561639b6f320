// The HIP build of the shared reduction kernels: hipcc compiles this file alone (-x hip --genco,
// one code object per HC_HIP_ARCHS target, packed into one offload bundle) and the bundle is
// embedded into hc_device_hip by embed_hip_kernels.S. The host compiler never sees it.
//
// hip_runtime.h comes first: under hipcc (HIP 5.2, clang 15) blockIdx, blockDim, gridDim and
// threadIdx are declared by the HIP headers, not built into the compiler as they are in nvcc.
#include <hip/hip_runtime.h>

#include "daemon/device/kernels/reduce_kernels.h"
