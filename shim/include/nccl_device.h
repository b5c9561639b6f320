/* nccl_device.h: NCCL's device API (kernels that call into the communicator from the GPU).
 *
 * hetero-comm's shim provides NCCL's host API only: the device API needs NCCL's own GPU-resident
 * communicator state, which the daemon-based design does not have.
 */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_
#error \
    "nccl_device.h: the NCCL device API is not provided by hetero-comm's shim (host API only: include <nccl.h>)"
#endif /* NCCL_DEVICE_H_ */
