// The node's GPU rows (discovery) as DeviceQuery carries them to clients (common/ipc): the session
// layer sees only the frame's entries, never discovery, so the translation lives here.
#pragma once

#include <vector>

#include "common/ipc/protocol.h"
#include "daemon/discovery/inventory.h"

namespace hc::server {

// Text longer than its field is cut to fit, always NUL-terminated; a figure that is not finite or
// is negative becomes 0 (the client refuses a reply carrying one).
ipc::DeviceEntry deviceEntryOf(const discovery::GpuRow& row);

std::vector<ipc::DeviceEntry> deviceEntriesOf(const std::vector<discovery::GpuRow>& rows);

}  // namespace hc::server
