// The node's inventory: one row per GPU, merging what the PCI bus shows with the devices the
// DeviceRegistry runs, plus the NICs and RDMA devices. This is what `hcctl devices` prints and
// what the daemon logs at startup.
// Depends on hc_common and hc_device (the registry's DeviceInfo) only.
//
// GPU ids. A row's id says which runtime, if any, drives the GPU:
//   "nvidia:0", "amd:1"       a CUDA or HIP device: vendor and index as the DeviceRegistry names
//                             it, so logs, rank tables and hcctl agree;
//   "sim-nvidia:0"            a simulated device (backend "sim") with its vendor label;
//   "pci-nvidia:0", "pci-intel:0"
//                             a GPU on the PCI bus that no runtime here drives (backend "none"),
//                             numbered per vendor in bus id order among such GPUs.
// The prefixes keep an unused or simulated device from ever being mistaken for the runtime
// device with the same index. The host device is not a GPU and gets no row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/device/registry.h"
#include "daemon/discovery/locality.h"
#include "daemon/discovery/nic_scan.h"
#include "daemon/discovery/pci_scan.h"

namespace hc::discovery {

constexpr const char* kBackendNone = "none";  // a GPU no runtime in this daemon drives

struct GpuRow {
  std::string id;          // see the scheme above
  std::string vendor;      // "nvidia", "amd", "intel"
  std::string model;       // the runtime's name when it has one, else the PCI scan's
  uint64_t vramBytes = 0;  // the runtime's figure, else the driver's; 0 when unknown
  std::string backend;     // "cuda", "hip", "sim", "none"
  std::string driver;      // the bound kernel driver; "" when unbound or not on PCI
  PciPlacement placement;  // busId (canonical) and NUMA node; empty for simulated devices
  // DeviceInfo::index of the registry device behind this row; -1 for backend "none".
  int deviceIndex = -1;
  // The physical NICs nearest this GPU (all those that tie), and how near they are; empty and
  // Unknown when the GPU is not on PCI or no NIC is.
  std::vector<std::string> nearestNics;
  Locality nicLocality = Locality::Unknown;
};

struct Inventory {
  std::vector<GpuRow> gpus;  // registry devices in registry order, then GPUs without a runtime
  std::vector<Nic> nics;
  std::vector<RdmaDevice> rdmaDevices;
  // Things the operator may want to know, one sentence each (a runtime device whose PCI address
  // sysfs does not list, a PCI function that could not be read). Not errors.
  std::vector<std::string> notes;
};

// Merges the scans with the registry. A registry device matches the PCI GPU with the same bus id
// (compared after normalizePciBusId: case and domain width do not matter). Never fails: what
// cannot be matched is listed on its own and explained in notes.
Inventory buildInventory(const PciScan& pci, const device::DeviceRegistry& registry,
                         const NetworkScan& network);

// Scans <roots> and merges. Control path: reads sysfs, a few milliseconds.
Inventory discoverInventory(const device::DeviceRegistry& registry, const SystemRoots& roots = {});

}  // namespace hc::discovery
