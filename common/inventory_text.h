// The text forms of a node's inventory that both the daemon and hcctl print: the GPU table, byte
// and link-speed units, and the column layout the daemon's NIC and RDMA tables share. hcctl
// rebuilds the table from the rows Control.GetNode returns, so `hcctl devices` prints the very
// table the daemon would. Plain text from plain rows: no daemon types, no JSON (each side builds
// its JSON from its own structs). Target hc_inventory_text; depends on the C++ standard library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hc {

// One GPU as the table shows it. Unknown values are empty, 0 (VRAM) or -1 (NUMA node).
struct GpuTableRow {
  std::string id;
  std::string vendor;
  std::string model;
  uint64_t vramBytes = 0;
  std::string backend;
  std::string pciBusId;
  int numaNode = -1;
  double weight = 0;  // measured speed relative to the node's fastest GPU; 0 = not measured
  bool vramEstimated = false;  // vramBytes is an estimate, printed "~80.0 GiB"
};

// GPU rows under the header "ID VENDOR MODEL VRAM BACKEND PCI NUMA WEIGHT" (WEIGHT with two
// decimals, "-" when not measured). Every column starts at the
// same offset on every line (its header's), two spaces apart, so a reader may split a line at the
// header's column offsets (model names contain spaces). Unknown values print as "-". Lines end in
// '\n' with no trailing spaces; no rows give the header alone.
std::string formatGpuTable(const std::vector<GpuTableRow>& rows);

// The layout of every inventory table: each column but the last padded to its widest cell, two
// spaces between columns, '\n' after each row and no trailing spaces.
using TableCells = std::vector<std::string>;
std::string alignColumns(const std::vector<TableCells>& rows);

// Cells of optional values: "-" for empty text or a negative (unknown) NUMA node.
std::string cellOrDash(const std::string& text);
std::string numaCell(int numaNode);

// "80.0 GiB", "512.0 MiB"; "-" for 0.
std::string formatBytes(uint64_t bytes);
// "100 Gb/s", "2.5 Gb/s", "100 Mb/s"; "-" for a negative speed.
std::string formatSpeed(int64_t megabitsPerSecond);

}  // namespace hc
