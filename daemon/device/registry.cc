#include "daemon/device/registry.h"

#include <cstdio>
#include <memory>

namespace hc::device {
namespace {

std::string deviceName(Vendor vendor, int index) {
  return std::string(vendorName(vendor)) + ":" + std::to_string(index);
}

std::string gibibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

Status DeviceRegistry::add(DevicePtr device) {
  if (device == nullptr) return invalidArgument("cannot register a null device");
  const DeviceInfo& info = device->info();
  for (const DevicePtr& d : devices_) {
    if (d->info().vendor == info.vendor && d->info().index == info.index) {
      return invalidArgument("device " + deviceName(info.vendor, info.index) +
                             " is already registered (backend " + d->info().backend + ")");
    }
  }
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

DeviceRegistry makeHostRegistry(HostDevice::ReduceKernel kernel) {
  DeviceRegistry registry;
  Status status = registry.add(std::make_unique<HostDevice>(std::move(kernel)));
  HC_CHECK(status.isOk());  // the first device cannot collide
  return registry;
}

}  // namespace hc::device
