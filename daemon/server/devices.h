// The node's devices, built once at startup from the configuration: the host, the simulated
// devices of [devices.sim], and the CUDA and HIP GPUs whose drivers answer. A missing or stub
// driver is logged and skipped: the daemon serves host and sim memory either way.
#pragma once

#include "common/status.h"
#include "daemon/config/daemon_config.h"
#include "daemon/device/registry.h"

namespace hc::server {

[[nodiscard]] Result<device::DeviceRegistry> buildDeviceRegistry(const config::DaemonConfig& config);

}  // namespace hc::server
