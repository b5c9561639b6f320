// DeviceCopier: moves operands between device memory and the daemon's host staging buffers, on
// one stream per device, in chunks of a configured size (a copy engine keeps several chunks in
// flight, and a fault is confined to the chunk and op that hit it). A failed stream is dropped and
// the next copy on that device gets a fresh one, as a CUDA sticky error requires.
// Runs on the IPC thread; each copy returns once its data has landed. Depends on hc_device.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "daemon/device/device.h"

namespace hc::session {

class DeviceCopier {
 public:
  explicit DeviceCopier(uint64_t chunkBytes) : chunkBytes_(chunkBytes == 0 ? 1 : chunkBytes) {}
  ~DeviceCopier();
  DeviceCopier(const DeviceCopier&) = delete;
  DeviceCopier& operator=(const DeviceCopier&) = delete;

  // Copies `bytes` from src to dst, where either side may be device memory of `device` and the
  // other host memory. DeviceError names the device when a chunk fails.
  [[nodiscard]] Status copy(device::Device* device, void* dst, const void* src, uint64_t bytes);
  // Runs `work` on `device`'s stream (its reduction kernel) and waits for it. DeviceError names
  // the device when the kernel or the stream fails.
  [[nodiscard]] Status reduce(device::Device* device, const device::ReduceWork& work);
  // Destroys the streams of `device` (before the device goes away).
  void forget(device::Device* device);

  uint64_t chunkBytes() const { return chunkBytes_; }

 private:
  Result<device::StreamId> streamFor(device::Device* device);

  uint64_t chunkBytes_;
  std::map<device::Device*, device::StreamId> streams_;
};

}  // namespace hc::session
