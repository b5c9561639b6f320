// The text forms of an inventory: tables and the log line. The GPU table and the column layout
// are common/inventory_text.h's, which hcctl prints too.
#include <algorithm>
#include <vector>

#include "common/inventory_text.h"
#include "daemon/discovery/inventory_format.h"

namespace hc::discovery {
namespace {

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string formatInventoryTable(const Inventory& inventory) {
  std::vector<GpuTableRow> rows;
  for (const GpuRow& gpu : inventory.gpus) {
    rows.push_back({gpu.id, gpu.vendor, gpu.model, gpu.vramBytes, gpu.backend, gpu.placement.busId,
                    gpu.placement.numaNode, gpu.speed.measured ? gpu.speed.weight : 0,
                    gpu.vramEstimated});
  }
  return formatGpuTable(rows);
}

std::string formatNicTable(const Inventory& inventory) {
  std::vector<TableCells> rows = {{"NAME", "STATE", "SPEED", "MTU", "KIND", "PCI", "NUMA", "RDMA"}};
  for (const Nic& nic : inventory.nics) {
    const char* kind = nic.isLoopback ? "loopback" : nic.isVirtual ? "virtual" : "pci";
    rows.push_back({nic.name, cellOrDash(nic.operState), formatSpeed(nic.speedMbps),
                    nic.mtu > 0 ? std::to_string(nic.mtu) : "-", kind,
                    cellOrDash(nic.placement.busId), numaCell(nic.placement.numaNode),
                    cellOrDash(nic.rdmaDevice)});
  }
  return alignColumns(rows);
}

std::string formatRdmaTable(const Inventory& inventory) {
  std::vector<TableCells> rows = {
      {"DEVICE", "PORT", "STATE", "RATE", "LINK", "PCI", "NUMA", "NETDEV"}};
  for (const RdmaDevice& device : inventory.rdmaDevices) {
    std::string netdevs;
    for (const std::string& name : device.netDevices)
      netdevs += (netdevs.empty() ? "" : ",") + name;
    for (const RdmaPort& port : device.ports) {
      rows.push_back({device.name, std::to_string(port.number), cellOrDash(port.state),
                      cellOrDash(port.rate), cellOrDash(port.linkLayer),
                      cellOrDash(device.placement.busId), numaCell(device.placement.numaNode),
                      cellOrDash(netdevs)});
    }
  }
  return alignColumns(rows);
}

std::string summarizeInventory(const Inventory& inventory) {
  std::string gpus;
  for (const GpuRow& gpu : inventory.gpus) {
    gpus += (gpus.empty() ? "" : ", ") + gpu.id + " " + gpu.backend;
    if (gpu.placement.onPci()) gpus += " pci=" + gpu.placement.busId;
    if (gpu.placement.numaNode >= 0) gpus += " numa=" + std::to_string(gpu.placement.numaNode);
  }
  std::string nics;
  size_t physical = 0;
  for (const Nic& nic : inventory.nics) {
    if (nic.isVirtual || nic.isLoopback) continue;
    ++physical;
    nics += (nics.empty() ? "" : ", ") + nic.name + " " + cellOrDash(nic.operState);
    if (nic.speedMbps >= 0) nics += " " + formatSpeed(nic.speedMbps);
    if (nic.placement.numaNode >= 0) nics += " numa=" + std::to_string(nic.placement.numaNode);
    if (!nic.rdmaDevice.empty()) nics += " rdma=" + nic.rdmaDevice;
  }
  std::string rdma;
  for (const RdmaDevice& device : inventory.rdmaDevices) {
    size_t active = std::count_if(device.ports.begin(), device.ports.end(),
                                  [](const RdmaPort& p) { return p.active(); });
    rdma += (rdma.empty() ? "" : ", ") + device.name + " " + std::to_string(active) + "/" +
            std::to_string(device.ports.size()) + " ports active";
  }

  std::string line = plural(inventory.gpus.size(), "GPU", "GPUs");
  if (!gpus.empty()) line += " [" + gpus + "]";
  line += "; " + plural(physical, "NIC", "NICs");
  if (!nics.empty()) line += " [" + nics + "]";
  line +=
      "; " + plural(inventory.nics.size() - physical, "virtual interface", "virtual interfaces");
  line += "; " + plural(inventory.rdmaDevices.size(), "RDMA device", "RDMA devices");
  if (!rdma.empty()) line += " [" + rdma + "]";
  if (!inventory.notes.empty()) line += "; " + plural(inventory.notes.size(), "note", "notes");
  return line;
}

}  // namespace hc::discovery
