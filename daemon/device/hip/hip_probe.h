// probeHipDevices(): what the daemon calls at startup to find this node's AMD GPUs. It opens the
// HIP runtime at run time (libamdhip64.so.6, then .so.5; no link dependency), so the same daemon
// binary runs on a node without ROCm and says why HIP is unavailable there.
// This header does not include the HIP headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/device/hip/hip_device.h"

namespace hc::device {

struct HipProbeOptions {
  // The runtime libraries to try, in order: names the dynamic loader searches for, or paths. The
  // first that opens and has every entry point is used. Tests pass names that do not exist.
  std::vector<std::string> libraryNames = {"libamdhip64.so.6", "libamdhip64.so.5"};
  // false: open the GPUs without loading the embedded kernels, so reductions stage through host
  // memory (to compare the two paths on one machine).
  bool loadKernels = true;
  // The amdgpu driver's compute device node. When it is missing, the reason says so: it explains
  // a failed hipInit better than HIP's error code does.
  std::string kfdPath = "/dev/kfd";
};

struct HipProbeResult {
  // The GPUs the daemon opened, in ordinal order. Hand them to the DeviceRegistry (a
  // unique_ptr<HipDevice> converts to DevicePtr); keep a HipDevice* first to read
  // stagingFallbackReason() and memoryUse() later.
  std::vector<std::unique_ptr<HipDevice>> devices;
  // GPUs the runtime reports that could not be opened, each with the reason; the probe logs them.
  std::vector<std::string> skipped;
  std::string library;     // the runtime library in use, e.g. "libamdhip64.so.6"
  int runtimeVersion = 0;  // hipRuntimeGetVersion: 60032830 means HIP 6.0; 0 when unknown
};

// Loads the runtime, initializes it and opens every GPU it reports.
// Unavailable, with a message that starts "HIP unavailable: " and says why, when no GPU can be
// used: no library loads or one lacks an entry point ("no usable libamdhip64 (...)"), hipInit
// fails ("hipInit failed: hipErrorNoDevice [100]", the error's name from hipGetErrorName), the
// runtime reports no device ("no devices (...)"), or every device was skipped. Either of the
// last three adds "; no /dev/kfd (...)" when that node is missing. Never crashes or hangs for
// lack of a GPU. Control path: call once at startup, from one thread.
[[nodiscard]] Result<HipProbeResult> probeHipDevices(const HipProbeOptions& options = {});

}  // namespace hc::device
