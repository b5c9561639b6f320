#include "daemon/discovery/nic_scan.h"

#include <algorithm>
#include <cstdlib>

namespace hc::discovery {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kArphrdLoopback = 772;  // `type` of a loopback interface (if_arp.h)
constexpr uint64_t kIffLoopback = 0x8;    // IFF_LOOPBACK in `flags`

bool linkOrFileExists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

bool looksLikeLoopback(const fs::path& dir, const std::string& name) {
  std::optional<int64_t> type = readDecimal(dir / "type");
  if (type) return *type == kArphrdLoopback;
  std::optional<uint64_t> flags = readHex(dir / "flags");
  if (flags) return (*flags & kIffLoopback) != 0;
  return name == "lo";  // neither attribute readable: the one name the kernel always uses
}

Nic readNic(const fs::path& classDir, const std::string& name) {
  const fs::path dir = classDir / name;
  Nic nic;
  nic.name = name;
  nic.operState = readText(dir / "operstate");
  std::optional<int64_t> mtu = readDecimal(dir / "mtu");
  nic.mtu = mtu && *mtu > 0 && *mtu <= (1 << 20) ? static_cast<int>(*mtu) : 0;
  // `speed` reads as EINVAL while the link is down and as -1 on some virtual drivers.
  std::optional<int64_t> speed = readDecimal(dir / "speed");
  nic.speedMbps = speed && *speed > 0 ? *speed : -1;
  nic.mac = readText(dir / "address");
  nic.isLoopback = looksLikeLoopback(dir, name);
  nic.isVirtual = !linkOrFileExists(dir / "device");
  if (!nic.isVirtual) {
    nic.driver = linkBasename(dir / "device/driver");
    nic.placement = pciPlacementOf(dir / "device");
  }
  return nic;
}

// "4: ACTIVE" -> "ACTIVE"; text without a colon is returned whole.
std::string afterColon(const std::string& text) {
  size_t colon = text.find(':');
  if (colon == std::string::npos) return text;
  size_t first = text.find_first_not_of(' ', colon + 1);
  return first == std::string::npos ? std::string() : text.substr(first);
}

RdmaPort readPort(const fs::path& portsDir, const std::string& number) {
  const fs::path dir = portsDir / number;
  RdmaPort port;
  std::optional<int64_t> n = parseDecimal(number);
  port.number = n ? static_cast<int>(*n) : 0;
  // "4: ACTIVE": the numeric ib_port_state, then its name; keep the name.
  port.state = afterColon(readText(dir / "state"));
  port.rate = readText(dir / "rate");
  port.rateGbps = port.rate.empty() ? 0 : std::strtod(port.rate.c_str(), nullptr);
  port.linkLayer = readText(dir / "link_layer");
  return port;
}

RdmaDevice readRdmaDevice(const fs::path& classDir, const std::string& name) {
  const fs::path dir = classDir / name;
  RdmaDevice device;
  device.name = name;
  device.placement = pciPlacementOf(dir / "device");
  for (const std::string& number : listDirectory(dir / "ports")) {
    RdmaPort port = readPort(dir / "ports", number);
    if (port.number > 0) device.ports.push_back(std::move(port));
  }
  std::sort(device.ports.begin(), device.ports.end(),
            [](const RdmaPort& a, const RdmaPort& b) { return a.number < b.number; });
  device.netDevices = listDirectory(dir / "device/net");
  return device;
}

}  // namespace

NetworkScan scanNetwork(const SystemRoots& roots) {
  NetworkScan scan;
  const fs::path netDir = roots.sys / "class/net";
  for (const std::string& name : listDirectory(netDir)) {
    // bonding_masters and other plain files live beside the interface links.
    std::error_code ec;
    if (!fs::is_directory(netDir / name, ec)) continue;
    scan.nics.push_back(readNic(netDir, name));
  }
  const fs::path ibDir = roots.sys / "class/infiniband";
  for (const std::string& name : listDirectory(ibDir)) {
    scan.rdmaDevices.push_back(readRdmaDevice(ibDir, name));
  }
  for (const RdmaDevice& device : scan.rdmaDevices) {
    for (const std::string& netName : device.netDevices) {
      for (Nic& nic : scan.nics) {
        if (nic.name == netName && nic.rdmaDevice.empty()) nic.rdmaDevice = device.name;
      }
    }
  }
  return scan;
}

}  // namespace hc::discovery
