#include "daemon/discovery/pci_scan.h"

#include <cstdio>

namespace hc::discovery {
namespace fs = std::filesystem;

namespace {

uint16_t readId(const fs::path& path) {
  std::optional<uint64_t> id = readHex(path);
  return id && *id <= 0xffff ? static_cast<uint16_t>(*id) : 0;
}

// The nvidia driver's per-GPU file, lines of "Key:<tabs and spaces>value". It is the only place
// the driver names the board without a runtime (NVML or CUDA).
std::string nvidiaInformation(const std::string& text, std::string_view key) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      std::string_view value = line.substr(key.size() + 1);
      size_t first = value.find_first_not_of(" \t");
      return first == std::string_view::npos ? std::string() : std::string(value.substr(first));
    }
    begin = end + 1;
  }
  return {};
}

void readDriverDetails(const SystemRoots& roots, const fs::path& dir, PciGpu& gpu) {
  switch (gpu.vendor) {
    case GpuVendor::Amd: {
      // amdgpu publishes its VRAM size and, on most boards, the product name from the VBIOS.
      std::optional<int64_t> vram = readDecimal(dir / "mem_info_vram_total");
      if (vram && *vram > 0) gpu.vramBytes = static_cast<uint64_t>(*vram);
      gpu.model = readText(dir / "product_name");
      break;
    }
    case GpuVendor::Nvidia: {
      Result<std::string> info =
          readAttribute(roots.proc / "driver/nvidia/gpus" / gpu.placement.busId / "information");
      if (info.isOk()) {
        gpu.model = nvidiaInformation(*info, "Model");
        gpu.uuid = nvidiaInformation(*info, "GPU UUID");
      }
      break;
    }
    case GpuVendor::Intel:
      // i915 and xe keep their memory regions in debugfs and the DRM uAPI, not in sysfs.
      break;
  }
  gpu.modelFromDriver = !gpu.model.empty();
  if (!gpu.modelFromDriver) {
    char fallback[64];
    std::snprintf(fallback, sizeof(fallback), "%s device 0x%04x", gpuVendorDisplayName(gpu.vendor),
                  gpu.deviceId);
    gpu.model = fallback;
  }
}

}  // namespace

const char* gpuVendorName(GpuVendor vendor) {
  switch (vendor) {
    case GpuVendor::Nvidia:
      return "nvidia";
    case GpuVendor::Amd:
      return "amd";
    case GpuVendor::Intel:
      return "intel";
  }
  return "unknown";
}

const char* gpuVendorDisplayName(GpuVendor vendor) {
  switch (vendor) {
    case GpuVendor::Nvidia:
      return "NVIDIA";
    case GpuVendor::Amd:
      return "AMD";
    case GpuVendor::Intel:
      return "Intel";
  }
  return "Unknown";
}

std::optional<GpuVendor> gpuVendorFromPciId(uint16_t vendorId) {
  switch (vendorId) {
    case kPciVendorNvidia:
      return GpuVendor::Nvidia;
    case kPciVendorAmd:
      return GpuVendor::Amd;
    case kPciVendorIntel:
      return GpuVendor::Intel;
    default:
      return std::nullopt;
  }
}

bool isGpuClass(uint32_t classCode) {
  return (classCode >> 16) == 0x03 || (classCode >> 8) == 0x1200;
}

PciScan scanPciGpus(const SystemRoots& roots) {
  PciScan scan;
  const fs::path devices = roots.sys / "bus/pci/devices";
  for (const std::string& name : listDirectory(devices)) {
    const fs::path dir = devices / name;
    std::optional<uint64_t> vendorId = readHex(dir / "vendor");
    std::optional<uint64_t> classCode = readHex(dir / "class");
    if (!vendorId || !classCode) {
      scan.notes.push_back("PCI device " + name + " skipped: unreadable " +
                           (vendorId ? "class" : "vendor"));
      continue;
    }
    std::optional<GpuVendor> vendor =
        *vendorId <= 0xffff ? gpuVendorFromPciId(static_cast<uint16_t>(*vendorId)) : std::nullopt;
    if (!vendor || !isGpuClass(static_cast<uint32_t>(*classCode))) continue;

    PciGpu gpu;
    gpu.placement = pciPlacementOf(dir);
    if (!gpu.placement.onPci()) {
      // A fake or unusual tree whose directory name is not an address: nothing to match on.
      scan.notes.push_back("PCI device " + name + " skipped: not named by a PCI address");
      continue;
    }
    gpu.vendor = *vendor;
    gpu.vendorId = static_cast<uint16_t>(*vendorId);
    gpu.deviceId = readId(dir / "device");
    gpu.subsystemVendorId = readId(dir / "subsystem_vendor");
    gpu.subsystemDeviceId = readId(dir / "subsystem_device");
    gpu.classCode = static_cast<uint32_t>(*classCode);
    gpu.driver = linkBasename(dir / "driver");
    gpu.linkSpeed = readText(dir / "current_link_speed");
    std::optional<int64_t> width = readDecimal(dir / "current_link_width");
    gpu.linkWidth = width && *width > 0 && *width <= 64 ? static_cast<int>(*width) : 0;
    gpu.localCpus = readText(dir / "local_cpulist");
    readDriverDetails(roots, dir, gpu);
    scan.gpus.push_back(std::move(gpu));
  }
  return scan;
}

}  // namespace hc::discovery
