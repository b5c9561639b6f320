/* hetero_comm/hc_sim.h: the simulated device, a GPU runtime over host memory.
 *
 * Machines without GPUs, and tests, use it where a training process would use CUDA or HIP: device
 * memory from hc_sim_malloc lives in a sealed memfd that the daemon maps by handle (as it maps a
 * cudaIpcMemHandle), and a simulated stream (hc_sim_stream_create) runs copies and the
 * stream-ordering protocol in order on a worker thread, as a GPU stream does. Each allocation
 * carries a vendor label, so one machine can host a job of "NVIDIA" and "AMD" ranks.
 *
 * Pass sim memory and a sim stream to any collective of hetero_comm/hc.h: the call returns at
 * once; the operation starts when the stream reaches it and later work on the stream sees its
 * result. Failures surface through hc_comm_get_async_error (or the request, when one is asked
 * for). With a NULL stream the call behaves as for host memory.
 *
 * The memory is host-mapped: the process may read and write it directly, or through
 * hc_sim_memcpy, which also runs in stream order when given a stream.
 */
#ifndef HETERO_COMM_HC_SIM_H_
#define HETERO_COMM_HC_SIM_H_

#include <stddef.h>

#include "hetero_comm/hc.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef enum { HC_SIM_NVIDIA = 1, HC_SIM_AMD = 2 } hc_sim_vendor_t;

/* Allocates `bytes` (> 0) of device memory on simulated device (vendor, device). The daemon
 * checks that it has that device when the memory is first used in an operation. */
hc_status_t hc_sim_malloc(void** ptr, size_t bytes, hc_sim_vendor_t vendor, int device);
/* Frees an allocation (the start of one); the daemon's mapping goes with it. */
hc_status_t hc_sim_free(void* ptr);

hc_status_t hc_sim_stream_create(hc_stream_t* stream, hc_sim_vendor_t vendor, int device);
/* Waits for the stream's work, then destroys it. */
hc_status_t hc_sim_stream_destroy(hc_stream_t stream);
/* Waits for the stream's work; HC_DEVICE_ERROR or HC_UNAVAILABLE when the stream failed. */
hc_status_t hc_sim_stream_synchronize(hc_stream_t stream);
/* Copies `bytes` between any two of host and sim memory: in stream order on `stream`, or at once
 * when stream is NULL. */
hc_status_t hc_sim_memcpy(void* dst, const void* src, size_t bytes, hc_stream_t stream);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* HETERO_COMM_HC_SIM_H_ */
