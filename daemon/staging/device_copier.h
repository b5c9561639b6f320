// DeviceCopier: moves operands between device memory and the daemon's host staging buffers, in
// chunks of a configured size (a copy engine keeps several chunks in flight, and a fault is
// confined to the chunk and op that hit it). Each device has two copy streams, one per direction,
// so copies into a device and out of it run side by side, as a GPU's copy engines do: the
// pipeline (slice_staging.h) copies one slice's results out while it copies the next slice's
// operands in. A failed stream is dropped and the next copy in its direction gets a fresh one,
// as a CUDA sticky error requires. It also keeps each device's scratch memory (reductions whose
// operands span devices gather them there).
// Runs on the IPC thread. Depends on hc_device.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "common/status.h"
#include "daemon/device/device.h"

namespace hc::staging {

class DeviceCopier {
 public:
  explicit DeviceCopier(uint64_t chunkBytes) : chunkBytes_(chunkBytes == 0 ? 1 : chunkBytes) {}
  ~DeviceCopier();
  DeviceCopier(const DeviceCopier&) = delete;
  DeviceCopier& operator=(const DeviceCopier&) = delete;

  // Copies `bytes` between device memory of `device` and host memory: into the device when
  // toDevice, else out of it. Returns once the data has landed. DeviceError names the device
  // when a chunk fails.
  [[nodiscard]] Status copy(device::Device* device, void* dst, const void* src, uint64_t bytes,
                            bool toDevice);
  // The same, without waiting: the copy runs until drain(). Both sides must stay valid until then.
  // An error here is one of enqueueing; the copy's own failure comes from drain().
  [[nodiscard]] Status enqueue(device::Device* device, void* dst, const void* src, uint64_t bytes,
                               bool toDevice);
  // Waits for every enqueued copy; the first failure, naming its device, or Ok.
  [[nodiscard]] Status drain();
  // Runs `work` on `device`'s stream (its reduction kernel) and waits for it. DeviceError names
  // the device when the kernel or the stream fails.
  [[nodiscard]] Status reduce(device::Device* device, const device::ReduceWork& work);
  // Device memory of at least `bytes` on `device`, kept for later calls: allocating may
  // synchronize a GPU, so the buffer only grows. Valid until the next scratch() for that device
  // or forget(); the caller must have waited for the work that used it before either.
  [[nodiscard]] Result<uint8_t*> scratch(device::Device* device, uint64_t bytes);
  // Destroys the streams and scratch of `device` (before the device goes away).
  void forget(device::Device* device);

  uint64_t chunkBytes() const { return chunkBytes_; }

 private:
  using Lane = std::pair<device::Device*, bool>;  // a device and a direction (toDevice)
  Result<device::StreamId> streamFor(const Lane& lane);
  void drop(const Lane& lane);

  uint64_t chunkBytes_;
  std::map<Lane, device::StreamId> streams_;
  std::set<Lane> pending_;  // lanes with copies enqueued since the last drain
  std::map<device::Device*, std::pair<void*, uint64_t>> scratch_;  // allocDevice()'s, bytes
  Status enqueueFailure_ = okStatus();
};

}  // namespace hc::staging
