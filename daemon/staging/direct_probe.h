// The device-direct probe: which devices' memory the daemon lends to the transport in place
// (GPUDirect RDMA and the like) instead of staging it through host memory. A device qualifies
// when three things hold, checked once at startup, before the transport carries anything else:
//   1. the device says how a transport would address its memory (Capabilities::transportMemory);
//   2. the transport moves that memory kind (Transport::movesMemory; Debian's UCX moves host
//      memory only, so its CUDA and HIP GPUs always stage);
//   3. a probe through the transport to itself shows the bytes arrive intact in both directions
//      and that moving them in place is no slower than staging them (device-to-host copy, then
//      the wire, and back): a transport that stages internally is not zero copy and gains
//      nothing over the daemon's own pipeline.
// Depends on device/ and transport/ only. Runs on the thread that owns the transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/device/device.h"
#include "daemon/device/registry.h"
#include "daemon/transport/transport.h"

namespace hc::staging {

struct DirectProbeOptions {
  // Bytes per probe transfer; raised to the transport's directMinBytes() when that is larger.
  size_t bytes = 1 << 20;
  // Timed round trips of each path, alternating; the fastest of each are compared, since a busy
  // machine only ever adds time to a round.
  int rounds = 5;
  // Longest a probe transfer may take: a transport that hangs on device memory fails the probe.
  std::chrono::milliseconds timeout{2000};
};

// What the probe found for one device.
struct DirectVerdict {
  const device::Device* device = nullptr;
  bool direct = false;  // the device's memory goes to the transport in place
  transport::MemoryKind kind = transport::MemoryKind::Host;
  std::string why;      // one line for the log, either way
  double directMs = 0;  // the fastest round trip (0 when not timed)
  double stagedMs = 0;
};

// Probes one device. A device without memory of its own (the host) is not direct: it has
// nothing to stage.
DirectVerdict probeDirect(transport::Transport& transport, device::Device& device,
                          const DirectProbeOptions& options);

// The devices whose memory is lent in place, and as which memory kind. Empty: everything
// stages, as it always does when the daemon runs without peers.
class DirectDevices {
 public:
  void add(const device::Device* device, transport::MemoryKind kind) { kinds_[device] = kind; }
  std::optional<transport::MemoryKind> kindOf(const device::Device* device) const;
  bool empty() const { return kinds_.empty(); }
  // Shorter messages stage: the transport may copy them with the CPU (directMinBytes()).
  size_t minBytes = 0;

 private:
  std::unordered_map<const device::Device*, transport::MemoryKind> kinds_;
};

// Probes every device of the registry (logging each verdict) and returns those that passed.
DirectDevices probeDirectDevices(transport::Transport& transport,
                                 const device::DeviceRegistry& devices,
                                 const DirectProbeOptions& options,
                                 std::vector<DirectVerdict>* verdicts = nullptr);

}  // namespace hc::staging
