// The sim devices of a node: how many of each vendor, how fast, which faults, and the one call
// that registers them. The daemon builds SimNodeOptions from the [devices.sim] config section.
// Depends on registry.h and sim_device.h only.
#pragma once

#include <cstdint>
#include <vector>

#include "common/simdev/sim_stream.h"
#include "daemon/device/registry.h"
#include "daemon/device/sim/sim_device.h"

namespace hc::device {

// A node has at most this many sim devices per vendor (as many GPUs as a large server holds);
// daemon/config checks the same bound on devices.sim.nvidia and devices.sim.amd.
inline constexpr int kMaxSimDevicesPerVendor = 16;

struct SimNodeOptions {
  int nvidia = 0;  // sim devices labelled nvidia, indices 0..nvidia-1
  int amd = 0;     // sim devices labelled amd, indices 0..amd-1
  simdev::StreamTiming timing;
  SimFaults faults;  // applied to every sim device of the node
  uint64_t memoryBytes = kDefaultSimMemoryBytes;
  // Every sim device lets the transport reach its memory (SimDevice::exposeToTransport).
  bool nicDirect = false;
  // Empty, or one speed per sim device in the order they are added (nvidia 0.., then amd 0..):
  // that device copies and runs its kernels at this many GB/s (timing.copyGBps and
  // timing.kernelGBps), as a node of GPUs of different speeds would.
  std::vector<double> deviceGBps;
};

// Adds options.nvidia NVIDIA-labelled then options.amd AMD-labelled SimDevices, each running
// `kernel` (null: no reductions). InvalidArgument, with nothing added, for a negative count, more
// than kMaxSimDevicesPerVendor of a vendor, a (vendor, index) already in the registry, or
// deviceGBps neither empty nor one positive speed per device.
// Control path (startup), before other threads see the registry.
[[nodiscard]] Status addSimDevices(DeviceRegistry& registry, const SimNodeOptions& options,
                                   ReduceKernel kernel);

}  // namespace hc::device
