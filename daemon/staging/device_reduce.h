// Local reductions on a device: when every operand of an allreduce, reduce or reduce-scatter
// among this daemon's ranks sits in the memory of devices of one vendor and backend, one of them
// (the home: the device holding most operands) combines them with its reduction kernel (a CUDA
// or HIP module, the sim device's stream worker) without staging through host memory. Operands
// on the other devices are copied to the home's scratch memory first, and their results back,
// device to device, window by window (a kernel is not assumed to reach a peer's memory).
// Anything else (operands of two vendors, host memory among them, a buffer-resident PreMulSum
// scalar) takes the host path. Across daemons, operands that share one device are combined there
// before the wire, slice by slice (combineSlice). Runs on the IPC thread.
// Depends on hc_device and hc_coll; the operands come as views (operand.h).
#pragma once

#include <vector>

#include "common/status.h"
#include "daemon/staging/device_copier.h"
#include "daemon/staging/operand.h"

namespace hc::staging {

struct ReductionPlacement {
  device::Device* home = nullptr;  // null: the match takes the host path
  bool spansDevices = false;       // some operands live on other devices than home
};

// Where the matched `ops` (one per local rank, each with its rank) reduce on a device (see
// above); home null when they cannot. The caller checks that the home has reduction kernels (a
// CUDA module that did not load leaves it without).
ReductionPlacement reductionPlacement(const std::vector<Operand>& ops);

// Runs the matched ops' reduction at `placement` and waits for it: the op's status.
[[nodiscard]] Status reduceOnDevice(const std::vector<Operand>& ops,
                                    const ReductionPlacement& placement, DeviceCopier& copier);

// The local combine of a collective across daemons, one slice at a time (slice_staging.h): the
// send operands of `ops` (this daemon's ranks, placed by reductionPlacement), elements [first,
// first + count) of each of the op's blocks (one, or `nranks` for a reduce-scatter), reduced at
// `placement` into the packed layout of one rank's send slice, and copied into host memory `out`
// (the copy lands at the copier's next drain()). Avg is summed and PreMulSum multiplied by each
// rank's scalar: the daemons combine their partial results as NodePlan does after its own local
// reduction (coll/hier/node_plan.h).
[[nodiscard]] Status combineSlice(const std::vector<Operand>& ops,
                                  const ReductionPlacement& placement, int nranks, uint64_t first,
                                  uint64_t count, DeviceCopier& copier, uint8_t* out);

}  // namespace hc::staging
