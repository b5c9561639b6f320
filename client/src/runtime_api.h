// The device-memory half of runtime_api.cc that hc_mem_free (api.cc) needs.
#pragma once

#include "common/status.h"

namespace hc::client {

// Frees ptr when hc_mem_alloc_device made it: true once freed, false when it did not make it.
Result<bool> freeIfDeviceAllocation(void* ptr);

}  // namespace hc::client
