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

// How fast a device moves and combines a collective's bytes, measured by the daemon
// (device_speed.h). Not measured: all figures 0 and `note` says why.
struct DeviceSpeed {
  bool measured = false;
  double h2dGBps = 0;     // host (pinned) -> device copies, 1 GB = 1e9 bytes
  double d2hGBps = 0;     // device -> host copies
  double reduceGBps = 0;  // float32 sum of two device buffers, bytes of one input per second
  // The rate a byte goes through staging in, the kernel and staging out one after another:
  // 1 / (1/h2d + 1/d2h + 1/reduce). What the weight compares.
  double rateGBps = 0;
  // rateGBps relative to the fastest measured GPU of this node (that one is 1.0); 0 unmeasured.
  double weight = 0;
  int64_t measuredUnixMs = 0;  // wall clock of the measurement; 0 unmeasured
  std::string note;            // why it was not measured ("fault injection is on", ...)
};

struct GpuRow {
  std::string id;          // see the scheme above
  std::string vendor;      // "nvidia", "amd", "intel"
  std::string model;       // the runtime's name when it has one, else the PCI scan's
  uint64_t vramBytes = 0;  // the runtime's figure, else the driver's; 0 when unknown
  std::string backend;     // "cuda", "hip", "sim", "none"
  std::string driver;      // the bound kernel driver; "" when unbound or not on PCI
  std::string driverVersion;  // the driver module's version; "" when unknown
  // Where model and vramBytes came from: a runtime ("cuda", "hip", "sim"), the driver's sysfs or
  // procfs ("amdgpu", "nvidia", "i915", "xe"), Debian's PCI id database ("pci.ids"), the bare
  // PCI ids ("pci-id", model only), or the size of the GPU's largest PCI memory window
  // ("pci-bar", VRAM only: an estimate, see vramEstimated). "" when the value is unknown.
  std::string modelSource;
  std::string vramSource;
  // vramBytes is the size of the memory window the GPU opens on the bus (vramSource "pci-bar"),
  // not a figure any driver gave: an 80 GB board with a resizable BAR shows 128 GiB (rounded up
  // to a power of two), an older board without one 256 MiB. Tables print it as "~128.0 GiB".
  bool vramEstimated = false;
  // PCIe link: current and maximum speed ("16.0 GT/s PCIe") and width (lanes); ""/0 unknown.
  std::string linkSpeed;
  int linkWidth = 0;
  std::string maxLinkSpeed;
  int maxLinkWidth = 0;
  PciPlacement placement;  // busId (canonical) and NUMA node; empty for simulated devices
  // DeviceInfo::index of the registry device behind this row; -1 for backend "none".
  int deviceIndex = -1;
  // The physical NICs nearest this GPU (all those that tie), and how near they are; empty and
  // Unknown when the GPU is not on PCI or no NIC is.
  std::vector<std::string> nearestNics;
  Locality nicLocality = Locality::Unknown;
  DeviceSpeed speed;  // filled by measureDeviceSpeeds (device_speed.h), not by buildInventory
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
