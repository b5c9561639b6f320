/* rccl/rccl.h: RCCL's C API as librccl.so.1 from hetero-comm's shim provides it.
 *
 * hetero-comm's own header with RCCL's names, values and layouts: NCCL 2.30.7's API with
 * hipStream_t, RCCL's ncclConfig_t (without graphStreamOrdering), ncclResult_t without ncclTimeout,
 * and RCCL's all-to-all spellings. No HIP installation is needed: hipStream_t is declared exactly
 * as the HIP runtime declares it, so this header may come before or after hip_runtime.h.
 */
#ifndef RCCL_H_
#define RCCL_H_

typedef struct ihipStream_t* hipStream_t;

#define HC_NCCL_STREAM_T hipStream_t
#define HC_NCCL_RCCL_FLAVOUR 1
#include "hetero_comm/nccl_common.h"

#define RCCL_BFLOAT16 1
#define RCCL_FLOAT8 1
#define RCCL_GATHER_SCATTER 1
#define RCCL_ALLTOALLV 1

#endif /* RCCL_H_ */
