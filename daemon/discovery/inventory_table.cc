// The text forms of an inventory: tables and the log line.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "daemon/discovery/inventory_format.h"

namespace hc::discovery {
namespace {

using Cells = std::vector<std::string>;

std::string orDash(const std::string& text) { return text.empty() ? "-" : text; }
std::string numaText(int node) { return node < 0 ? "-" : std::to_string(node); }

// Pads every column but the last to its widest cell, two spaces between columns.
std::string alignColumns(const std::vector<Cells>& rows) {
  std::vector<size_t> widths;
  for (const Cells& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const Cells& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(widths[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string formatBytes(uint64_t bytes) {
  if (bytes == 0) return "-";
  char text[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  }
  return text;
}

std::string formatSpeed(int64_t megabitsPerSecond) {
  if (megabitsPerSecond < 0) return "-";
  if (megabitsPerSecond < 1000) return std::to_string(megabitsPerSecond) + " Mb/s";
  char text[32];
  if (megabitsPerSecond % 1000 == 0) {
    std::snprintf(text, sizeof(text), "%lld Gb/s",
                  static_cast<long long>(megabitsPerSecond / 1000));
  } else {
    std::snprintf(text, sizeof(text), "%.1f Gb/s", static_cast<double>(megabitsPerSecond) / 1000);
  }
  return text;
}

std::string formatInventoryTable(const Inventory& inventory) {
  std::vector<Cells> rows = {{"ID", "VENDOR", "MODEL", "VRAM", "BACKEND", "PCI", "NUMA"}};
  for (const GpuRow& gpu : inventory.gpus) {
    rows.push_back({orDash(gpu.id), orDash(gpu.vendor), orDash(gpu.model),
                    formatBytes(gpu.vramBytes), orDash(gpu.backend), orDash(gpu.placement.busId),
                    numaText(gpu.placement.numaNode)});
  }
  return alignColumns(rows);
}

std::string formatNicTable(const Inventory& inventory) {
  std::vector<Cells> rows = {{"NAME", "STATE", "SPEED", "MTU", "KIND", "PCI", "NUMA", "RDMA"}};
  for (const Nic& nic : inventory.nics) {
    const char* kind = nic.isLoopback ? "loopback" : nic.isVirtual ? "virtual" : "pci";
    rows.push_back({nic.name, orDash(nic.operState), formatSpeed(nic.speedMbps),
                    nic.mtu > 0 ? std::to_string(nic.mtu) : "-", kind, orDash(nic.placement.busId),
                    numaText(nic.placement.numaNode), orDash(nic.rdmaDevice)});
  }
  return alignColumns(rows);
}

std::string formatRdmaTable(const Inventory& inventory) {
  std::vector<Cells> rows = {{"DEVICE", "PORT", "STATE", "RATE", "LINK", "PCI", "NUMA", "NETDEV"}};
  for (const RdmaDevice& device : inventory.rdmaDevices) {
    std::string netdevs;
    for (const std::string& name : device.netDevices)
      netdevs += (netdevs.empty() ? "" : ",") + name;
    for (const RdmaPort& port : device.ports) {
      rows.push_back({device.name, std::to_string(port.number), orDash(port.state),
                      orDash(port.rate), orDash(port.linkLayer), orDash(device.placement.busId),
                      numaText(device.placement.numaNode), orDash(netdevs)});
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
    nics += (nics.empty() ? "" : ", ") + nic.name + " " + orDash(nic.operState);
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
