// DeviceRegistry: the devices of this node, built once at startup (the host device, the sim
// devices of [devices.sim], and the CUDA and HIP GPUs whose drivers answer: server/devices.cc)
// and read by sessions, coll and the control plane (`hcctl devices`).
// Depends on device.h and hc_common only.
#pragma once

#include <string>
#include <vector>

#include "daemon/device/device.h"
#include "daemon/device/host/host_device.h"

namespace hc::device {

// Threads: add() runs while the daemon starts, before other threads see the registry; after
// that it is read-only, and the const methods may be called from any thread.
// Ownership: owns its devices; a Device* from find() or devices() is borrowed and valid for the
// registry's lifetime.
class DeviceRegistry {
 public:
  DeviceRegistry() = default;
  DeviceRegistry(DeviceRegistry&&) = default;
  DeviceRegistry& operator=(DeviceRegistry&&) = default;

  // InvalidArgument for a null device or one whose (vendor, index) is already registered: the
  // pair names a device everywhere (logs, hcctl, rank tables).
  [[nodiscard]] Status add(DevicePtr device);

  const std::vector<DevicePtr>& devices() const { return devices_; }
  // NotFound names the devices that do exist.
  [[nodiscard]] Result<Device*> find(Vendor vendor, int index) const;
  // One line per device, for the startup log:
  //   "host:0 backend=host model=\"...\" memory=15.5 GiB caps=[reduce] transport=[host]"
  std::string describe() const;

 private:
  std::vector<DevicePtr> devices_;
};

// The registry of a node without GPU backends: one HostDevice running `kernel`.
DeviceRegistry makeHostRegistry(HostDevice::ReduceKernel kernel);

}  // namespace hc::device
