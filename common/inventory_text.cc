#include "common/inventory_text.h"

#include <algorithm>
#include <cstdio>

namespace hc {

std::string alignColumns(const std::vector<TableCells>& rows) {
  std::vector<size_t> widths;
  for (const TableCells& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const TableCells& row : rows) {
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

std::string cellOrDash(const std::string& text) { return text.empty() ? "-" : text; }
std::string numaCell(int numaNode) { return numaNode < 0 ? "-" : std::to_string(numaNode); }

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

std::string formatGpuTable(const std::vector<GpuTableRow>& gpus) {
  std::vector<TableCells> rows = {
      {"ID", "VENDOR", "MODEL", "VRAM", "BACKEND", "PCI", "NUMA", "WEIGHT"}};
  for (const GpuTableRow& gpu : gpus) {
    char weight[32] = "-";
    if (gpu.weight > 0) std::snprintf(weight, sizeof(weight), "%.2f", gpu.weight);
    rows.push_back({cellOrDash(gpu.id), cellOrDash(gpu.vendor), cellOrDash(gpu.model),
                    (gpu.vramEstimated && gpu.vramBytes > 0 ? "~" : "") + formatBytes(gpu.vramBytes),
                    cellOrDash(gpu.backend), cellOrDash(gpu.pciBusId),
                    numaCell(gpu.numaNode), weight});
  }
  return alignColumns(rows);
}

}  // namespace hc
