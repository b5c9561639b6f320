// DeviceRegions: the device allocations one client registered (MemRegister), each mapped once into
// its device and named by a region id that means something only on this client's connection.
// Handles are untrusted input: the kind must match the device it names, the device checks the
// size against what the mapping really has, and a region is never visible to another client.
// A region lives while the client keeps it registered or an op still uses it (shared ownership):
// unregistering during an op unmaps after the op ends.
// Runs on the IPC thread. Depends on hc_device and hc_common.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/ipc/protocol.h"
#include "common/status.h"
#include "daemon/device/registry.h"
#include "daemon/metrics/daemon_metrics.h"

namespace hc::session {

class DeviceRegion {
 public:
  // metrics (borrowed, may be null) counts the import now and its release in the destructor.
  DeviceRegion(device::Device* device, device::ImportedBuffer buffer, uint32_t id,
               uint64_t allocationId, metrics::DaemonMetrics* metrics);
  ~DeviceRegion();  // releases the import
  DeviceRegion(const DeviceRegion&) = delete;
  DeviceRegion& operator=(const DeviceRegion&) = delete;

  device::Device* device() const { return device_; }
  uint8_t* data() const { return static_cast<uint8_t*>(buffer_.ptr); }
  uint64_t bytes() const { return buffer_.size; }
  uint32_t id() const { return id_; }
  // "sim nvidia:1 region 3", for error texts.
  std::string describe() const;

 private:
  device::Device* device_;
  device::ImportedBuffer buffer_;
  uint32_t id_;
  uint64_t allocationId_;
  metrics::DaemonMetrics* metrics_;
};

using DeviceRegionPtr = std::shared_ptr<DeviceRegion>;

class DeviceRegions {
 public:
  // Enough for every allocation of a large training job's caching allocator; bounds what one
  // client can make the daemon map.
  static constexpr size_t kMaxRegions = 65536;

  // Maps the allocation the frame describes (fd: the descriptor that came with it, or -1) and
  // returns its region id. The device is the one at the frame's PCI address when it carries one
  // (kMemRegisterPciAddress; the ordinal is then only a hint), else the vendor's device of the
  // frame's ordinal. InvalidArgument for an unknown memory type or vendor, a PCI address no
  // device of that vendor has (the message names it and the devices there are), a handle kind
  // the device does not take, a missing fd; NotFound for an ordinal this node does not have; the
  // device's own error when the import fails (a size that does not match, missing seals);
  // NoResource past the byte cap (setMaxBytes), the client's cue to release regions it holds.
  [[nodiscard]] Result<uint32_t> add(const ipc::MemRegisterFrame& request, int fd,
                                     const device::DeviceRegistry& registry);
  // Whether add() takes legacy IPC handles (devices.legacy_ipc); refused with PermissionDenied
  // when not. Default: taken.
  void allowLegacyIpc(bool allowed) { legacyIpcAllowed_ = allowed; }
  // devices.max_imported_bytes_per_client: add() refuses an allocation that would take the
  // bytes of this client's registered regions past maxBytes (0: no cap). A bound against a
  // client that registers without end (the same allocation again and again maps it again);
  // libhcclient releases its least recently used idle regions when refused and tries again.
  void setMaxBytes(uint64_t maxBytes) { maxBytes_ = maxBytes; }
  // Where imports and releases are counted (borrowed; null: nowhere).
  void setMetrics(metrics::DaemonMetrics* metrics) { metrics_ = metrics; }
  // NotFound for a region this client does not have.
  [[nodiscard]] Status remove(uint32_t id);
  // Null when this client has no such region.
  DeviceRegionPtr find(uint32_t id) const;
  size_t size() const { return regions_.size(); }
  // The bytes of the registered regions (the cap's measure). A region unregistered while an op
  // uses it no longer counts here, though it stays mapped until the op ends.
  uint64_t bytes() const { return bytes_; }

 private:
  std::map<uint32_t, DeviceRegionPtr> regions_;
  uint32_t nextId_ = 1;
  bool legacyIpcAllowed_ = true;
  uint64_t maxBytes_ = 0;
  uint64_t bytes_ = 0;
  metrics::DaemonMetrics* metrics_ = nullptr;
};

}  // namespace hc::session
