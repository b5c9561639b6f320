// The inventory as people and programs read it: aligned tables (`hcctl devices`), JSON (the
// control plane, `hcctl devices --json`), and one line for the daemon's startup log.
// Depends on hc_common and nlohmann_json (private to this target).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/discovery/inventory.h"

namespace hc::discovery {

// GPU rows under the header "ID VENDOR MODEL VRAM BACKEND PCI NUMA". Every column starts at the
// same offset on every line (its header's), two spaces apart, so a reader may split a line at the
// header's column offsets (model names contain spaces). Unknown values print as "-". Lines end in
// '\n' with no trailing spaces; an inventory without GPUs gives the header alone.
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

// "80.0 GiB", "512.0 MiB"; "-" for 0.
std::string formatBytes(uint64_t bytes);
// "100 Gb/s", "2.5 Gb/s", "100 Mb/s"; "-" for a negative speed.
std::string formatSpeed(int64_t megabitsPerSecond);

}  // namespace hc::discovery
