#include "daemon/server/device_entries.h"

#include <cmath>
#include <cstring>

#include "common/ipc/frames.h"

namespace hc::server {
namespace {

double figure(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

}  // namespace

ipc::DeviceEntry deviceEntryOf(const discovery::GpuRow& row) {
  ipc::DeviceEntry e;
  std::memset(&e, 0, sizeof(e));
  ipc::copyText(e.id, row.id);
  ipc::copyText(e.vendor, row.vendor);
  ipc::copyText(e.backend, row.backend);
  ipc::copyText(e.model, row.model);
  ipc::copyText(e.pciBusId, row.placement.busId);
  e.memoryBytes = row.vramBytes;
  e.numaNode = row.placement.numaNode;
  e.flags = row.speed.measured ? ipc::kDeviceMeasured : 0;
  e.weight = figure(row.speed.weight);
  e.h2dGBps = figure(row.speed.h2dGBps);
  e.d2hGBps = figure(row.speed.d2hGBps);
  e.reduceGBps = figure(row.speed.reduceGBps);
  e.rateGBps = figure(row.speed.rateGBps);
  ipc::copyText(e.note, row.speed.note);
  return e;
}

std::vector<ipc::DeviceEntry> deviceEntriesOf(const std::vector<discovery::GpuRow>& rows) {
  std::vector<ipc::DeviceEntry> entries;
  entries.reserve(rows.size());
  for (const auto& row : rows) entries.push_back(deviceEntryOf(row));
  return entries;
}

}  // namespace hc::server
