#include "daemon/discovery/inventory.h"

#include <map>

namespace hc::discovery {
namespace {

std::string registryName(const device::DeviceInfo& info) {
  return std::string(device::vendorName(info.vendor)) + ":" + std::to_string(info.index);
}

GpuRow rowFromRuntime(const device::DeviceInfo& info) {
  GpuRow row;
  row.vendor = device::vendorName(info.vendor);
  row.id = (info.backend == "sim" ? "sim-" : "") + registryName(info);
  row.model = info.model;
  row.vramBytes = info.memoryBytes;
  row.backend = info.backend.empty() ? std::string(kBackendNone) : info.backend;
  if (!row.model.empty()) row.modelSource = row.backend;
  if (row.vramBytes != 0) row.vramSource = row.backend;
  row.deviceIndex = info.index;
  return row;
}

// The runtime knows the board best (CUDA names the exact SKU); the PCI scan fills what it left
// empty and alone knows the locality.
void mergePci(const PciGpu& gpu, GpuRow& row) {
  row.placement = gpu.placement;
  row.driver = gpu.driver;
  row.driverVersion = gpu.driverVersion;
  if (row.model.empty()) {
    row.model = gpu.model;
    row.modelSource = gpu.modelSource;
  }
  if (row.vramBytes == 0) {
    row.vramBytes = gpu.vramBytes;
    row.vramSource = gpu.vramSource;
    row.vramEstimated = gpu.vramEstimated;
  }
  row.linkSpeed = gpu.linkSpeed;
  row.linkWidth = gpu.linkWidth;
  row.maxLinkSpeed = gpu.maxLinkSpeed;
  row.maxLinkWidth = gpu.maxLinkWidth;
}

GpuRow rowFromPci(const PciGpu& gpu, int ordinal) {
  GpuRow row;
  row.vendor = gpuVendorName(gpu.vendor);
  row.id = "pci-" + row.vendor + ":" + std::to_string(ordinal);
  row.backend = kBackendNone;
  mergePci(gpu, row);
  return row;
}

void findNearestNics(const std::vector<Nic>& nics, GpuRow& row) {
  if (!row.placement.onPci()) return;
  for (const Nic& nic : nics) {
    if (nic.isVirtual || nic.isLoopback || !nic.placement.onPci()) continue;
    Locality locality = localityBetween(row.placement, nic.placement);
    if (locality == Locality::Unknown) continue;
    if (row.nearestNics.empty() || locality < row.nicLocality) {
      row.nearestNics.clear();
      row.nicLocality = locality;
    }
    if (locality == row.nicLocality) row.nearestNics.push_back(nic.name);
  }
}

}  // namespace

Inventory buildInventory(const PciScan& pci, const device::DeviceRegistry& registry,
                         const NetworkScan& network) {
  Inventory inventory;
  inventory.notes = pci.notes;

  std::map<std::string, size_t> gpuByBusId;  // canonical bus id -> index into pci.gpus
  for (size_t i = 0; i < pci.gpus.size(); ++i) gpuByBusId[pci.gpus[i].placement.busId] = i;
  std::vector<bool> claimed(pci.gpus.size(), false);

  for (const device::DevicePtr& device : registry.devices()) {
    const device::DeviceInfo& info = device->info();
    if (info.vendor == device::Vendor::Host) continue;  // CPUs and host memory: not a GPU
    GpuRow row = rowFromRuntime(info);
    if (!info.pciBusId.empty()) {
      std::optional<std::string> busId = normalizePciBusId(info.pciBusId);
      auto match = busId ? gpuByBusId.find(*busId) : gpuByBusId.end();
      if (match != gpuByBusId.end() && !claimed[match->second]) {
        claimed[match->second] = true;
        mergePci(pci.gpus[match->second], row);
      } else {
        row.placement.busId = busId.value_or(info.pciBusId);
        inventory.notes.push_back(
            registryName(info) + " (" + info.backend + ") reports PCI address " + info.pciBusId +
            (match != gpuByBusId.end() ? ", which another device already claimed"
                                       : ", which is not a GPU in sysfs"));
      }
    }
    inventory.gpus.push_back(std::move(row));
  }

  std::map<GpuVendor, int> nextOrdinal;  // per vendor, among GPUs without a runtime
  for (size_t i = 0; i < pci.gpus.size(); ++i) {
    if (claimed[i]) continue;
    inventory.gpus.push_back(rowFromPci(pci.gpus[i], nextOrdinal[pci.gpus[i].vendor]++));
  }

  inventory.nics = network.nics;
  inventory.rdmaDevices = network.rdmaDevices;
  for (GpuRow& row : inventory.gpus) findNearestNics(inventory.nics, row);
  return inventory;
}

Inventory discoverInventory(const device::DeviceRegistry& registry, const SystemRoots& roots) {
  return buildInventory(scanPciGpus(roots), registry, scanNetwork(roots));
}

}  // namespace hc::discovery
