// probeCudaDevices(): what the daemon calls at startup to find this node's NVIDIA GPUs. It opens
// the CUDA driver at run time (no link dependency), so the same daemon binary runs on a node
// without a driver and says why CUDA is unavailable there.
// This header does not include cuda.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/device/cuda/cuda_device.h"

namespace hc::device {

struct CudaProbeOptions {
  // The driver library: a name the dynamic loader searches for, or a path. Tests pass the
  // toolkit's stub (/usr/local/cuda/lib64/stubs/libcuda.so) or a name that does not exist.
  std::string driverLibrary = "libcuda.so.1";
};

struct CudaProbeResult {
  // The GPUs the daemon opened, in ordinal order. Hand them to the DeviceRegistry (a
  // unique_ptr<CudaDevice> converts to DevicePtr); keep a CudaDevice* first to read
  // stagingFallbackReason() and memoryUse() later.
  std::vector<std::unique_ptr<CudaDevice>> devices;
  // GPUs the driver reports that the daemon left alone, each with the reason
  // (EXCLUSIVE_PROCESS compute mode, a failure while opening it), for the caller to log.
  std::vector<std::string> skipped;
  int driverVersion = 0;  // cuDriverGetVersion: 12040 means CUDA 12.4
};

// Loads the driver, initializes it and opens every GPU it reports.
// Unavailable, with a message that starts "CUDA unavailable: " and says why, when no GPU can be
// used: the library cannot be loaded (no NVIDIA driver), it is the toolkit's stub library
// (CUDA_ERROR_STUB_LIBRARY), it lacks an entry point (a driver older than CUDA 11), cuInit
// failed, the driver reports no device, or every device was skipped (the reasons are listed).
// Never crashes for lack of a driver. Control path: call once at startup, from one thread.
[[nodiscard]] Result<CudaProbeResult> probeCudaDevices(const CudaProbeOptions& options = {});

}  // namespace hc::device
