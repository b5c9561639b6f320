// The node's devices, built once at startup from the configuration: the host, the simulated
// devices of [devices.sim], and the CUDA and HIP GPUs whose drivers answer. A missing or stub
// driver is logged and skipped: the daemon serves host and sim memory either way.
// Then the node's inventory over them (daemon/discovery), which the daemon logs, serves and
// measures.
#pragma once

#include <memory>

#include "common/status.h"
#include "daemon/config/daemon_config.h"
#include "daemon/device/registry.h"
#include "daemon/discovery/device_board.h"
#include "daemon/metrics/daemon_metrics.h"

namespace hc::server {

[[nodiscard]] Result<device::DeviceRegistry> buildDeviceRegistry(const config::DaemonConfig& config);

// Takes the inventory (a few milliseconds of sysfs), logs it, and makes the board that serves it.
// Each published measurement is logged and sets the hetero_comm_device_weight gauges. `devices`
// and `metrics` are borrowed and must outlive the board. Measures nothing yet.
std::unique_ptr<discovery::DeviceBoard> makeDeviceBoard(const config::DaemonConfig& config,
                                                        const device::DeviceRegistry& devices,
                                                        metrics::DaemonMetrics& metrics);

// Whether the board measures at startup: [devices] measure, unless the sim fault injection counts
// copies (devices.sim.fail_copy_at: the measurement's copies would move the injected fault).
bool measuresAtStart(const config::DaemonConfig& config);

}  // namespace hc::server
