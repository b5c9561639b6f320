#include "daemon/device/registry.h"

#include <cstdio>
#include <memory>

#include "common/ipc/protocol.h"
#include "common/simdev/sim_pci.h"
#include "daemon/device/host/host_device.h"

namespace hc::device {
namespace {

std::string deviceName(Vendor vendor, int index) {
  return std::string(vendorName(vendor)) + ":" + std::to_string(index);
}

// A field of 1 to `maxDigits` hexadecimal digits, no sign, no prefix; nullopt otherwise.
std::optional<uint32_t> hexField(std::string_view text, size_t maxDigits) {
  if (text.empty() || text.size() > maxDigits) return std::nullopt;
  uint32_t value = 0;
  for (char c : text) {
    uint32_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    value = value << 4 | digit;
  }
  return value;
}

std::string gibibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

Result<uint32_t> parsePciAddress(std::string_view text) {
  // [domain:]bus:device.function
  auto refuse = [&] {
    return invalidArgument("\"" + std::string(text) +
                           "\" is not a PCI address (domain:bus:device.function, e.g. "
                           "0000:3b:00.0)");
  };
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return refuse();
  std::string_view rest = text.substr(0, dot);
  const size_t lastColon = rest.rfind(':');
  if (lastColon == std::string_view::npos) return refuse();
  const size_t firstColon = rest.find(':');
  std::string_view domain = "0";
  std::string_view bus = rest.substr(0, lastColon);
  if (firstColon != lastColon) {
    domain = rest.substr(0, firstColon);
    bus = rest.substr(firstColon + 1, lastColon - firstColon - 1);
  }
  const auto d = hexField(domain, 4);
  const auto b = hexField(bus, 2);
  const auto dev = hexField(rest.substr(lastColon + 1), 2);
  const auto fn = hexField(text.substr(dot + 1), 1);
  if (!d || !b || !dev || !fn || *dev > 0x1f || *fn > 7) return refuse();
  return ipc::packPciAddress(*d, *b, *dev, *fn);
}

std::string formatPciAddress(uint32_t address) {
  char text[16];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", ipc::pciDomain(address),
                ipc::pciBus(address), ipc::pciDevice(address), ipc::pciFunction(address));
  return text;
}

std::optional<uint32_t> pciAddressOf(const DeviceInfo& info) {
  if (!info.pciBusId.empty()) {
    Result<uint32_t> address = parsePciAddress(info.pciBusId);
    if (!address.isOk()) return std::nullopt;
    return *address;
  }
  if (info.backend != "sim") return std::nullopt;
  switch (info.vendor) {
    case Vendor::Nvidia:
      return simdev::simPciAddress(static_cast<uint8_t>(ipc::DeviceVendor::Nvidia), info.index);
    case Vendor::Amd:
      return simdev::simPciAddress(static_cast<uint8_t>(ipc::DeviceVendor::Amd), info.index);
    case Vendor::Host:
      break;
  }
  return std::nullopt;
}

Status DeviceRegistry::add(DevicePtr device) {
  if (device == nullptr) return invalidArgument("cannot register a null device");
  const DeviceInfo& info = device->info();
  for (const DevicePtr& d : devices_) {
    if (d->info().vendor == info.vendor && d->info().index == info.index) {
      return invalidArgument("device " + deviceName(info.vendor, info.index) +
                             " is already registered (backend " + d->info().backend + ")");
    }
  }
  pciAddresses_.push_back(pciAddressOf(info));
  devices_.push_back(std::move(device));
  return okStatus();
}

Result<Device*> DeviceRegistry::find(Vendor vendor, int index) const {
  std::string known;
  for (const DevicePtr& d : devices_) {
    if (d->info().vendor == vendor && d->info().index == index) return d.get();
    known += (known.empty() ? "" : ", ") + deviceName(d->info().vendor, d->info().index);
  }
  return notFound("no device " + deviceName(vendor, index) +
                  " on this node (devices: " + (known.empty() ? "none" : known) + ")");
}

Result<Device*> DeviceRegistry::findByPciAddress(Vendor vendor, uint32_t address) const {
  std::string known;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const DeviceInfo& info = devices_[i]->info();
    if (info.vendor != vendor) continue;
    if (pciAddresses_[i] == address) return devices_[i].get();
    known += (known.empty() ? "" : ", ") + deviceName(info.vendor, info.index) + " at " +
             (pciAddresses_[i] ? formatPciAddress(*pciAddresses_[i]) : "no PCI address");
  }
  return notFound("no " + std::string(vendorName(vendor)) + " device at PCI address " +
                  formatPciAddress(address) + " on this node (" + vendorName(vendor) +
                  " devices: " + (known.empty() ? "none" : known) + ")");
}

std::string DeviceRegistry::describe() const {
  if (devices_.empty()) return "no devices\n";
  std::string out;
  for (const DevicePtr& d : devices_) {
    const DeviceInfo& info = d->info();
    const Capabilities& caps = d->capabilities();
    out += deviceName(info.vendor, info.index) + " backend=" + info.backend + " model=\"" +
           info.model + "\" memory=" + gibibytes(info.memoryBytes);
    if (!info.pciBusId.empty()) out += " pci=" + info.pciBusId;
    std::string flags;
    auto flag = [&flags](bool on, const char* name) {
      if (on) flags += (flags.empty() ? "" : ",") + std::string(name);
    };
    flag(caps.ipcImport, "ipc");
    flag(caps.reduceKernels, "reduce");
    flag(caps.streamOrdering, "streams");
    flag(caps.pinnedStaging, "pinned");
    out += " caps=[" + flags + "] transport=[";
    for (size_t i = 0; i < caps.transportMemory.size(); ++i) {
      out += (i ? "," : "") + std::string(memoryTypeName(caps.transportMemory[i]));
    }
    out += "]\n";
  }
  return out;
}

DeviceRegistry makeHostRegistry(ReduceKernel kernel) {
  DeviceRegistry registry;
  Status status = registry.add(std::make_unique<HostDevice>(std::move(kernel)));
  HC_CHECK(status.isOk());  // the first device cannot collide
  return registry;
}

}  // namespace hc::device
