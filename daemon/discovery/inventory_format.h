// The inventory as people and programs read it: aligned tables (`hcctl devices`), JSON (the
// control plane, `hcctl devices --json`), and one line for the daemon's startup log.
// The GPU table, the column layout and the units are common/inventory_text.h's, shared with hcctl.
// Depends on hc_common, hc_inventory_text and nlohmann_json (private to this target).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/discovery/inventory.h"

namespace hc::discovery {

// The GPU rows as formatGpuTable (common/inventory_text.h) prints them: "ID VENDOR MODEL VRAM
// BACKEND PCI NUMA WEIGHT", columns aligned at their headers' offsets; an inventory without GPUs
// gives the header alone.
std::string formatInventoryTable(const Inventory& inventory);

// Network interfaces, same layout: "NAME STATE SPEED MTU KIND PCI NUMA RDMA", KIND being "pci",
// "virtual" or "loopback".
std::string formatNicTable(const Inventory& inventory);

// RDMA ports, one line each: "DEVICE PORT STATE RATE LINK PCI NUMA NETDEV".
std::string formatRdmaTable(const Inventory& inventory);

// {"gpus": [...], "nics": [...], "rdmaDevices": [...], "notes": [...]}. Field names are the
// struct members' (camelCase); unknown values are null (NUMA -1, speed -1, VRAM 0, no PCI).
// indent < 0 gives one line.
std::string inventoryToJson(const Inventory& inventory, int indent = 2);

// One line, no newline, for the startup log:
//   "2 GPUs [nvidia:0 cuda pci=0000:3b:00.0 numa=1, pci-intel:0 none pci=0000:00:02.0];
//    1 NIC [eth0 up 100 Gb/s numa=1 rdma=mlx5_0]; 3 virtual interfaces; 1 RDMA device
//    [mlx5_0 1/2 ports active]; 1 note"
std::string summarizeInventory(const Inventory& inventory);

}  // namespace hc::discovery
