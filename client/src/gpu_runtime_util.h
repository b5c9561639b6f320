// What the GPU runtimes of the client (runtime_cuda.cc, runtime_hip.cc) share beyond the
// DeviceRuntime interface: the PCI addresses of their devices, asked once per device, and the
// words that name one allocation in an error. Header-only: the runtimes' tests compile those files
// on their own. Depends on common/ only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/src/device_runtime.h"
#include "common/ipc/protocol.h"

namespace hc::client {

// The PCI address of each device ordinal, asked of the runtime on first use: it cannot change
// while the process lives, and lookups run for every buffer of every call.
// Threads: get() may be called from any thread.
class PciAddresses {
 public:
  // `ask(device, &domain, &bus, &slot)` asks the runtime (outside the lock: runtime calls); true
  // when it answered. A failure is not remembered, so the next get() asks again. A GPU is
  // function 0 of its slot: the runtimes report no function number.
  template <typename Ask>
  std::optional<uint32_t> get(int device, Ask&& ask) {
    if (device < 0) return std::nullopt;
    const auto at = static_cast<size_t>(device);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (at < known_.size() && known_[at]) return known_[at];
    }
    int domain = -1;
    int bus = -1;
    int slot = -1;
    if (!ask(device, &domain, &bus, &slot) || domain < 0 || bus < 0 || slot < 0) {
      return std::nullopt;
    }
    const uint32_t address = ipc::packPciAddress(
        static_cast<uint32_t>(domain), static_cast<uint32_t>(bus), static_cast<uint32_t>(slot), 0);
    std::lock_guard<std::mutex> lock(mutex_);
    if (known_.size() <= at) known_.resize(at + 1);
    known_[at] = address;
    return address;
  }

 private:
  std::mutex mutex_;
  std::vector<std::optional<uint32_t>> known_;  // guarded by mutex_; by ordinal
};

// "CUDA allocation 77 at 0x7f3a00000000 (8192 bytes, GPU 1)", for errors about one allocation.
inline std::string describeAllocation(const char* runtime, const DevicePointer& p) {
  char base[32];
  std::snprintf(base, sizeof(base), "%#llx", static_cast<unsigned long long>(p.base));
  return std::string(runtime) + " allocation " + std::to_string(p.allocationId) + " at " + base +
         " (" + std::to_string(p.bytes) + " bytes, GPU " + std::to_string(p.device) + ")";
}

// `failure` with the allocation it was about appended.
inline Status aboutAllocation(Status failure, const char* runtime, const DevicePointer& p) {
  return Status(failure.code(), failure.message() + " for " + describeAllocation(runtime, p));
}

}  // namespace hc::client
