#include "daemon/discovery/locality.h"

#include <algorithm>

#include "daemon/discovery/sysfs_files.h"

namespace hc::discovery {
namespace fs = std::filesystem;

namespace {

// "pci0000:3a": a host bridge's directory under /sys/devices.
bool isHostBridgeName(const std::string& name) {
  return name.size() > 3 && name.compare(0, 3, "pci") == 0 && name.find(':') != std::string::npos;
}

bool startsAtHostBridge(const PciPlacement& p) {
  return !p.path.empty() && isHostBridgeName(p.path.front());
}

}  // namespace

PciPlacement pciPlacementOf(const fs::path& deviceDir) {
  PciPlacement placement;
  std::error_code ec;
  fs::path dir = fs::canonical(deviceDir, ec);
  if (ec) return placement;

  // Up to the nearest PCI function (class devices often hang below one: virtio2, auxiliary).
  while (!isPciAddress(dir.filename().string())) {
    if (!dir.has_relative_path() || dir.parent_path() == dir) return placement;
    dir = dir.parent_path();
  }
  std::optional<std::string> busId = normalizePciBusId(dir.filename().string());
  placement.busId = *busId;
  std::optional<int64_t> numa = readDecimal(dir / "numa_node");
  placement.numaNode = numa && *numa >= 0 ? static_cast<int>(*numa) : -1;

  // Then on up through the bridges to the host bridge, if the tree shows one.
  for (fs::path up = dir; up.has_relative_path() && up.parent_path() != up; up = up.parent_path()) {
    std::string name = up.filename().string();
    if (std::optional<std::string> address = normalizePciBusId(name)) {
      placement.path.push_back(*address);
      continue;
    }
    if (isHostBridgeName(name)) placement.path.push_back(name);
    break;
  }
  std::reverse(placement.path.begin(), placement.path.end());
  return placement;
}

const char* localityName(Locality locality) {
  switch (locality) {
    case Locality::SamePciSwitch:
      return "pcie-switch";
    case Locality::SameHostBridge:
      return "host-bridge";
    case Locality::SameNumaNode:
      return "numa-node";
    case Locality::CrossNumaNode:
      return "cross-numa";
    case Locality::Unknown:
      return "unknown";
  }
  return "unknown";
}

Locality localityBetween(const PciPlacement& a, const PciPlacement& b) {
  if (!a.onPci() || !b.onPci()) return Locality::Unknown;
  if (startsAtHostBridge(a) && startsAtHostBridge(b) && a.path.front() == b.path.front()) {
    // Bridges both paths share below the host bridge. The last element of each path is the
    // device itself, never a bridge, so it is left out of the comparison.
    size_t limit = std::min(a.path.size(), b.path.size()) - 1;
    size_t shared = 0;
    while (shared + 1 < limit && a.path[shared + 1] == b.path[shared + 1]) ++shared;
    return shared > 0 ? Locality::SamePciSwitch : Locality::SameHostBridge;
  }
  if (a.numaNode == b.numaNode) return Locality::SameNumaNode;
  if (a.numaNode < 0 || b.numaNode < 0) return Locality::Unknown;
  return Locality::CrossNumaNode;
}

}  // namespace hc::discovery
