// Local reductions on the device itself: when every operand of an allreduce, reduce or
// reduce-scatter among this daemon's ranks sits in the memory of one device whose backend has
// reduction kernels (a CUDA or HIP module, the sim device's stream worker), the device combines
// them in place, without staging through host memory. Anything else (operands on several
// devices or vendors, host memory, a buffer-resident PreMulSum scalar, a communicator that spans
// daemons) takes the host path. Runs on the IPC thread. Depends on hc_device.
#pragma once

#include <optional>

#include "common/status.h"
#include "daemon/session/communicator.h"
#include "daemon/session/device_copier.h"

namespace hc::session {

// The one device all of `match`'s operands live on, when the match is a reduction of this
// daemon's ranks the device could run (see above); null otherwise. The caller checks that the
// device has reduction kernels (a CUDA module that did not load leaves it without).
device::Device* reductionDevice(const Match& match);

// Runs the match's reduction on `device` (reductionDevice's) and waits for it: the op's status.
[[nodiscard]] Status reduceOnDevice(const Match& match, device::Device* device,
                                    DeviceCopier& copier);

}  // namespace hc::session
