/* nccl.h: NCCL 2.30.7's C API as libnccl.so.2 from hetero-comm's shim provides it.
 *
 * hetero-comm's own header with NCCL's names, values and layouts; no CUDA installation is needed.
 * The stream type is the CUDA runtime's opaque pointer, declared here exactly as the runtime
 * declares it, so this header may come before or after cuda_runtime.h.
 */
#ifndef NCCL_H_
#define NCCL_H_

typedef struct CUstream_st* cudaStream_t;

#define HC_NCCL_STREAM_T cudaStream_t
#include "hetero_comm/nccl_common.h"

#endif /* NCCL_H_ */
