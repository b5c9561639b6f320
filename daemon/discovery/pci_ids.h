// Names of PCI devices from the PCI id database (the `pci.ids` file lspci reads; Debian package
// pci.ids). This is what names a GPU whose driver is absent or does not publish a product name:
// 10de:2330 is "GH100 [H100 SXM5 80GB]".
// Depends on hc_common only.
//
// The file is text from outside the project and is treated as untrusted: lines longer than
// kMaxPciIdsLineBytes are skipped, entries without an id or a name are skipped, reading stops
// after kMaxPciIdsFileBytes, and a missing or garbled file gives no names, never an error.
//
// Format (https://pci-ids.ucw.cz): "vvvv  Vendor" at column 0, "\tdddd  Device" under it,
// "\t\tssss ssss  Subsystem" (subvendor, subdevice) under a device, "#" comments, and a class
// section ("C 03  Display controller", "\t00  VGA compatible controller") after the vendors
// whose indented lines are not devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <string>

namespace hc::discovery {

constexpr size_t kMaxPciIdsLineBytes = 1024;
constexpr size_t kMaxPciIdsFileBytes = 64 * 1024 * 1024;

// One vendor's part of the database: its devices and their subsystems.
struct PciIdVendor {
  struct Device {
    std::string name;
    std::map<uint32_t, std::string> subsystems;  // (subvendor << 16 | subdevice) -> name
  };
  std::string name;
  std::map<uint16_t, Device> devices;
};

// Reads `in` up to the end of `vendorId`'s section; nullopt when the vendor is not listed.
std::optional<PciIdVendor> readPciIdVendor(std::istream& in, uint16_t vendorId);

// Looks names up in one pci.ids file, reading it once per vendor asked for and keeping that
// vendor's section. Not thread-safe: one instance serves one scan.
class PciIdDatabase {
 public:
  // An absent Debian path (kDebianPciIds) falls back to kHwdataPciIds, where Fedora and
  // hwdata-based distributions keep the same file.
  explicit PciIdDatabase(std::filesystem::path path);

  // The subsystem's name when the file lists (subvendor, subdevice) under the device, else the
  // device's name; "" when the file, the vendor or the device is missing. Subsystem ids of 0 mean
  // "not reported" and select the device's name.
  std::string name(uint16_t vendorId, uint16_t deviceId, uint16_t subsystemVendorId = 0,
                   uint16_t subsystemDeviceId = 0);

 private:
  const PciIdVendor* vendor(uint16_t vendorId);

  std::filesystem::path path_;
  std::map<uint16_t, std::optional<PciIdVendor>> vendors_;  // read so far; nullopt: not listed
};

}  // namespace hc::discovery
