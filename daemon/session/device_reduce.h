// Local reductions on a device: when every operand of an allreduce, reduce or reduce-scatter
// among this daemon's ranks sits in the memory of devices of one vendor and backend, one of them
// (the home: the device holding most operands) combines them with its reduction kernel (a CUDA
// or HIP module, the sim device's stream worker) without staging through host memory. Operands
// on the other devices are copied to the home's scratch memory first, and their results back,
// device to device, window by window (a kernel is not assumed to reach a peer's memory).
// Anything else (operands of two vendors, host memory among them, a buffer-resident PreMulSum
// scalar, a communicator that spans daemons) takes the host path. Runs on the IPC thread.
// Depends on hc_device.
#pragma once

#include "common/status.h"
#include "daemon/session/communicator.h"
#include "daemon/session/device_copier.h"

namespace hc::session {

struct ReductionPlacement {
  device::Device* home = nullptr;  // null: the match takes the host path
  bool spansDevices = false;       // some operands live on other devices than home
};

// Where `match` reduces on a device (see above); home null when it cannot. The caller checks
// that the home has reduction kernels (a CUDA module that did not load leaves it without).
ReductionPlacement reductionPlacement(const Match& match);

// Runs the match's reduction at `placement` and waits for it: the op's status.
[[nodiscard]] Status reduceOnDevice(const Match& match, const ReductionPlacement& placement,
                                    DeviceCopier& copier);

}  // namespace hc::session
