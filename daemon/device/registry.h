// DeviceRegistry: the devices of this node, built once at startup (the host device, the sim
// devices of [devices.sim], and the CUDA and HIP GPUs whose drivers answer: server/devices.cc)
// and read by sessions, coll and the control plane (`hcctl devices`). Also the one reading of a
// device's PCI address, by which clients name GPUs (MemRegisterFrame::pciAddress).
// Depends on device.h and hc_common only (plus the header-only common/simdev/sim_pci.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/device/device.h"

namespace hc::device {

// PCI addresses packed as the MemRegister frame carries them (ipc::packPciAddress).
// "0000:3b:00.0", or "3b:00.0" for domain 0, hexadecimal in either case (drivers print upper
// case, sysfs lower case). InvalidArgument naming the text for anything else, fields too wide
// included (domain > ffff, device > 1f, function > 7).
[[nodiscard]] Result<uint32_t> parsePciAddress(std::string_view text);
// "0000:3b:00.0", lower case, as sysfs spells it.
std::string formatPciAddress(uint32_t address);
// The address clients name this device by: its pciBusId, or for a sim device, which is on no
// bus and has none, the synthetic address of common/simdev/sim_pci.h. nullopt for the host and
// for a bus id that does not parse.
std::optional<uint32_t> pciAddressOf(const DeviceInfo& info);

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
  // The device of `vendor` at PCI `address` (packed; see pciAddressOf()). NotFound names the
  // address and every device of that vendor with its own address.
  [[nodiscard]] Result<Device*> findByPciAddress(Vendor vendor, uint32_t address) const;
  // One line per device, for the startup log:
  //   "host:0 backend=host model=\"...\" memory=15.5 GiB caps=[reduce] transport=[host]"
  std::string describe() const;

 private:
  std::vector<DevicePtr> devices_;
  std::vector<std::optional<uint32_t>> pciAddresses_;  // pciAddressOf(devices_[i]), read at add()
};

// The registry of a node without GPU backends: one HostDevice running `kernel`.
DeviceRegistry makeHostRegistry(ReduceKernel kernel);

}  // namespace hc::device
