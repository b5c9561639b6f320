#include "daemon/discovery/pci_scan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "daemon/discovery/pci_ids.h"

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

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 ..." (the open modules
// say "Open Kernel Module for x86_64"): the first word made of digits and dots.
std::string nvidiaProcVersion(std::string_view text) {
  constexpr std::string_view kPrefix = "NVRM version:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return {};
  std::string_view line = text.substr(kPrefix.size(), text.find('\n') - kPrefix.size());
  size_t begin = 0;
  while (begin < line.size()) {
    size_t end = line.find_first_of(" \t", begin);
    if (end == std::string_view::npos) end = line.size();
    std::string_view word = line.substr(begin, end - begin);
    bool versionLike = !word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
                       word.find('.') != std::string_view::npos &&
                       word.find_first_not_of("0123456789.") == std::string_view::npos;
    if (versionLike) return std::string(word);
    begin = end + 1;
  }
  return {};
}

std::string readDriverVersion(const SystemRoots& roots, const std::string& driver) {
  if (driver.empty() || driver == "." || driver == "..") return {};
  std::string module = driver;  // "vfio-pci" is module vfio_pci
  std::replace(module.begin(), module.end(), '-', '_');
  std::string version = readText(roots.sys / "module" / module / "version");
  if (version.empty() && driver == "nvidia") {
    version = nvidiaProcVersion(readText(roots.proc / "driver/nvidia/version"));
  }
  return version;
}

// A byte count as drivers print it: decimal, or hexadecimal with "0x". nullopt unless positive.
std::optional<uint64_t> readByteCount(const fs::path& path) {
  Result<std::string> text = readAttribute(path);
  if (!text.isOk()) return std::nullopt;
  std::string_view value = *text;
  std::optional<uint64_t> bytes;
  if (value.substr(0, 2) == "0x" || value.substr(0, 2) == "0X") {
    bytes = parseHex(value);
  } else if (std::optional<int64_t> decimal = parseDecimal(value); decimal && *decimal > 0) {
    bytes = static_cast<uint64_t>(*decimal);
  }
  return bytes && *bytes > 0 ? bytes : std::nullopt;
}

// The largest prefetchable memory BAR among the six standard ones (the `resource` file's first
// lines; the ROM and SR-IOV windows follow them). On NVIDIA GPUs that is BAR1, the window onto
// VRAM. 0 when none can be read.
uint64_t largestPrefetchableBar(const fs::path& resourceFile) {
  constexpr uint64_t kIoResourceMem = 0x200;
  constexpr uint64_t kIoResourcePrefetch = 0x2000;
  constexpr int kStandardBars = 6;
  Result<std::string> text = readAttribute(resourceFile);
  if (!text.isOk()) return 0;
  uint64_t largest = 0;
  size_t begin = 0;
  for (int bar = 0; bar < kStandardBars && begin < text->size(); ++bar) {
    size_t end = text->find('\n', begin);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + begin, end - begin);
    begin = end + 1;
    // "0x<start> 0x<end> 0x<flags>"
    size_t first = line.find(' ');
    size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    if (second == std::string_view::npos) continue;
    std::optional<uint64_t> low = parseHex(line.substr(0, first));
    std::optional<uint64_t> high = parseHex(line.substr(first + 1, second - first - 1));
    std::optional<uint64_t> flags = parseHex(line.substr(second + 1));
    if (!low || !high || !flags || *high <= *low) continue;
    if ((*flags & kIoResourceMem) == 0 || (*flags & kIoResourcePrefetch) == 0) continue;
    largest = std::max(largest, *high - *low + 1);
  }
  return largest;
}

// xe: one `tileN/physical_vram_size_bytes` per tile under the PCI function, summed.
uint64_t xeVramBytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const std::string& name : listDirectory(dir)) {
    if (name.rfind("tile", 0) != 0) continue;
    if (std::optional<uint64_t> bytes = readByteCount(dir / name / "physical_vram_size_bytes")) {
      total += *bytes;
    }
  }
  return total;
}

// i915 (discrete GPUs): `lmem_total_bytes` on the DRM card, which sysfs keeps under the PCI
// function as drm/cardN (the same directory /sys/class/drm/cardN links to). Intel's backport
// modules name it `prelim_lmem_total_bytes`.
uint64_t i915VramBytes(const fs::path& dir) {
  for (const std::string& name : listDirectory(dir / "drm")) {
    if (name.rfind("card", 0) != 0 || name.find('-') != std::string::npos) continue;  // card0-DP-1
    for (const char* attribute : {"lmem_total_bytes", "prelim_lmem_total_bytes"}) {
      if (std::optional<uint64_t> bytes = readByteCount(dir / "drm" / name / attribute)) {
        return *bytes;
      }
    }
  }
  return 0;
}

void readDriverDetails(const SystemRoots& roots, const fs::path& dir, PciGpu& gpu) {
  switch (gpu.vendor) {
    case GpuVendor::Amd: {
      // amdgpu publishes its VRAM size and, on most boards, the product name from the VBIOS.
      if (std::optional<uint64_t> vram = readByteCount(dir / "mem_info_vram_total")) {
        gpu.vramBytes = *vram;
        gpu.vramSource = "amdgpu";
      }
      gpu.model = readText(dir / "product_name");
      if (!gpu.model.empty()) gpu.modelSource = "amdgpu";
      break;
    }
    case GpuVendor::Nvidia: {
      Result<std::string> info =
          readAttribute(roots.proc / "driver/nvidia/gpus" / gpu.placement.busId / "information");
      if (info.isOk()) {
        gpu.model = nvidiaInformation(*info, "Model");
        gpu.uuid = nvidiaInformation(*info, "GPU UUID");
        if (!gpu.model.empty()) gpu.modelSource = "nvidia";
      }
      // Neither sysfs nor procfs has the VRAM size without NVML; the window onto it does.
      if (uint64_t bar = largestPrefetchableBar(dir / "resource"); bar > 0) {
        gpu.vramBytes = bar;
        gpu.vramSource = "pci-bar";
        gpu.vramEstimated = true;
      }
      break;
    }
    case GpuVendor::Intel:
      if (uint64_t vram = xeVramBytes(dir); vram > 0) {
        gpu.vramBytes = vram;
        gpu.vramSource = "xe";
      } else if (uint64_t lmem = i915VramBytes(dir); lmem > 0) {
        gpu.vramBytes = lmem;
        gpu.vramSource = "i915";
      }
      // Integrated GPUs share system memory and publish no size: VRAM stays unknown.
      break;
  }
  gpu.modelFromDriver = !gpu.model.empty();
}

void nameFromPciIds(PciIdDatabase& pciIds, PciGpu& gpu) {
  if (!gpu.model.empty()) return;
  gpu.model = pciIds.name(gpu.vendorId, gpu.deviceId, gpu.subsystemVendorId, gpu.subsystemDeviceId);
  if (!gpu.model.empty()) {
    gpu.modelSource = "pci.ids";
    return;
  }
  char fallback[64];
  std::snprintf(fallback, sizeof(fallback), "%s device 0x%04x", gpuVendorDisplayName(gpu.vendor),
                gpu.deviceId);
  gpu.model = fallback;
  gpu.modelSource = "pci-id";
}

int readLinkWidth(const fs::path& path) {
  std::optional<int64_t> width = readDecimal(path);
  return width && *width > 0 && *width <= 64 ? static_cast<int>(*width) : 0;
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
  PciIdDatabase pciIds(roots.pciIds);  // read only if a GPU needs a name from it
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
    gpu.driverVersion = readDriverVersion(roots, gpu.driver);
    gpu.linkSpeed = readText(dir / "current_link_speed");
    gpu.linkWidth = readLinkWidth(dir / "current_link_width");
    gpu.maxLinkSpeed = readText(dir / "max_link_speed");
    gpu.maxLinkWidth = readLinkWidth(dir / "max_link_width");
    gpu.localCpus = readText(dir / "local_cpulist");
    readDriverDetails(roots, dir, gpu);
    nameFromPciIds(pciIds, gpu);
    scan.gpus.push_back(std::move(gpu));
  }
  return scan;
}

}  // namespace hc::discovery
