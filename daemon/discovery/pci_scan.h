// The node's GPUs as the PCI bus shows them, before (and without) any vendor runtime: vendor and
// device ids, locality, the bound driver, and what that driver publishes in sysfs.
// Depends on hc_common only.
//
// This is what lets `hcctl devices` list a GPU whose runtime is absent or broken, and what gives
// runtime devices their NUMA node: CUDA and HIP name a device's PCI address, sysfs knows where
// that address sits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/discovery/locality.h"
#include "daemon/discovery/sysfs_files.h"

namespace hc::discovery {

enum class GpuVendor : uint8_t { Nvidia, Amd, Intel };

constexpr uint16_t kPciVendorNvidia = 0x10de;
constexpr uint16_t kPciVendorAmd = 0x1002;  // ATI/AMD graphics; 0x1022 is AMD's CPUs and chipsets
constexpr uint16_t kPciVendorIntel = 0x8086;

const char* gpuVendorName(GpuVendor vendor);         // "nvidia", "amd", "intel"
const char* gpuVendorDisplayName(GpuVendor vendor);  // "NVIDIA", "AMD", "Intel"
std::optional<GpuVendor> gpuVendorFromPciId(uint16_t vendorId);

// Display controllers (class 0x03xxxx: VGA, 3D, other) and processing accelerators (0x1200xx),
// the class data-center GPUs without a display engine use.
bool isGpuClass(uint32_t classCode);

struct PciGpu {
  PciPlacement placement;  // busId, NUMA node, bridges
  GpuVendor vendor = GpuVendor::Nvidia;
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  uint16_t subsystemVendorId = 0;  // 0 when not reported
  uint16_t subsystemDeviceId = 0;
  uint32_t classCode = 0;
  std::string driver;  // bound driver: "nvidia", "amdgpu", "i915", "xe", "vfio-pci"; "" if none
  // `/sys/module/<driver>/version` (out-of-tree and DKMS modules have one), for nvidia also its
  // procfs version; "" for in-tree drivers, which carry the kernel's version instead.
  std::string driverVersion;
  // The driver's product name (amdgpu `product_name`, the nvidia driver's procfs "Model"), else
  // the PCI id database's (pci_ids.h), else "<Vendor> device 0x<device id>".
  std::string model;
  bool modelFromDriver = false;
  std::string modelSource;  // "amdgpu", "nvidia", "pci.ids" or "pci-id" (the fallback)
  // amdgpu `mem_info_vram_total`, the xe tiles' `physical_vram_size_bytes` summed, i915's
  // `lmem_total_bytes`; for NVIDIA, whose driver publishes no size, the largest prefetchable
  // memory BAR (vramEstimated). 0 when unknown.
  uint64_t vramBytes = 0;
  std::string vramSource;  // "amdgpu", "xe", "i915", "pci-bar"; "" when unknown
  bool vramEstimated = false;
  std::string uuid;          // the nvidia driver's "GPU UUID"; "" when not known
  std::string linkSpeed;     // `current_link_speed`, e.g. "16.0 GT/s PCIe"; "" when not reported
  int linkWidth = 0;         // `current_link_width` lanes; 0 when not reported
  std::string maxLinkSpeed;  // `max_link_speed`: what the slot and device could train to
  int maxLinkWidth = 0;      // `max_link_width` lanes; 0 when not reported
  std::string localCpus;     // `local_cpulist`, e.g. "0-15,32-47"; "" when not reported
};

struct PciScan {
  std::vector<PciGpu> gpus;  // in bus id order
  // Entries that might have been GPUs but could not be classified (vendor or class unreadable),
  // one sentence each, for the startup log.
  std::vector<std::string> notes;
};

// Reads <sys>/bus/pci/devices/* and the driver's files (<sys>/module/<driver>/version; for
// NVIDIA GPUs <proc>/driver/nvidia/gpus/<bus id>/information and <proc>/driver/nvidia/version),
// and looks up in <pciIds> the GPUs no driver names. Never fails: a missing tree is an empty scan.
// Control path: reads a few files per PCI function, and the id database once per vendor.
PciScan scanPciGpus(const SystemRoots& roots = {});

}  // namespace hc::discovery
