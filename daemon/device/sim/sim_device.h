// SimDevice: a simulated GPU behind the Device interface. Imports are sealed memfds mapped shared
// (SimAllocation), streams are worker threads with a simulated copy engine (SimStream), and the
// device carries a vendor label (nvidia, amd) so that tests and demos can build a mixed-vendor
// node on a machine without GPUs. Faults can be injected to exercise the error paths.
// Depends on device.h and common/simdev only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/simdev/sim_allocation.h"
#include "common/simdev/sim_stream.h"
#include "daemon/device/device.h"
#include "daemon/device/sim/device_ranges.h"
#include "daemon/device/sim/sim_address_space.h"

namespace hc::device {

// The nominal memory a sim device reports in DeviceInfo (nothing is reserved).
inline constexpr uint64_t kDefaultSimMemoryBytes = 16ull << 30;

// Faults a sim device injects, to test what happens when a GPU fails under a running job.
struct SimFaults {
  // The N-th copy enqueued on this device (counted across all its streams, from 1) fails with
  // DeviceError "injected copy fault on sim <vendor>:<index>" when it runs, and its stream is
  // failed from then on. Only that one copy: the count keeps going. 0 = off. Copies that move
  // nothing (0 bytes, dst == src) are not enqueued and not counted.
  uint64_t failCopyAt = 0;
  // Added to every task on every stream of the device: a slow GPU or a congested link.
  uint32_t slowStreamUs = 0;
};

// The only handle form a SimDevice imports: MemoryType::Sim with the memfd in `fd` (as it came
// over SCM_RIGHTS) and its exact size in `size`; `bytes` is the client's allocation id, unused
// here. The memfd must carry the SHRINK and GROW seals (SimAllocation::import).
//
// By default the data path cannot hand sim memory to the transport (capabilities().
// transportMemory is empty): like a GPU without GPUDirect, its bytes reach the network by staging
// through host memory. exposeToTransport() models the other case. Copies may name any memory of
// this process (imports, pinned, ordinary host memory, as CUDA's unified addressing allows),
// including the memory of another sim device of the same vendor (capabilities().peerCopy), but not
// of another vendor's (InvalidArgument): no runtime copies between an NVIDIA and an AMD GPU.
// Kernels (reduceAsync) must not touch another sim device's memory (InvalidArgument), as a GPU
// kernel without peer access cannot. A range that starts in an import, a device allocation or a
// pinned allocation must end inside it (InvalidArgument), which catches what a GPU would report as
// an illegal address.
//
// Thread-safe: bookkeeping is under one mutex, never held while data moves; the work itself runs
// on each stream's worker.
class SimDevice final : public Device {
 public:
  using ReduceKernel = device::ReduceKernel;

  // `vendor` must be Nvidia or Amd (HC_CHECK): sim devices stand in for GPUs. The kernel runs on
  // the stream's worker with the whole range [0, count); null means no reductions
  // (capabilities().reduceKernels false). faults.slowStreamUs adds to timing.extraDelayUs.
  // timing.copyGBps times copies, timing.kernelGBps kernels (0: a kernel pays the latency and
  // its own run time only).
  SimDevice(Vendor vendor, int index, simdev::StreamTiming timing, SimFaults faults,
            ReduceKernel kernel, uint64_t memoryBytes = kDefaultSimMemoryBytes);
  // Reclaims what callers left: events, then streams (each finishes or skips its queued work),
  // then imports and pinned memory, so no queued copy outlives the memory it names.
  ~SimDevice() override;
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  // From now on capabilities().transportMemory is {Host}: sim memory is host memory, so a
  // transport can read and write it in place, as a NIC with GPUDirect RDMA reaches a GPU's
  // (the daemon still probes it before it lends it). Before the device is shared.
  void exposeToTransport() { caps_.transportMemory = {MemoryType::Host}; }

  // "sim nvidia:0", as error messages name this device.
  const std::string& name() const { return name_; }
  // Copies enqueued so far (the count failCopyAt compares against).
  uint64_t copiesEnqueued() const { return copies_.load(std::memory_order_relaxed); }

  // hc::Device
  const DeviceInfo& info() const override { return info_; }
  const Capabilities& capabilities() const override { return caps_; }
  Result<ImportedBuffer> importBuffer(const BufferHandle& handle) override;
  Status releaseBuffer(ImportedBuffer& buffer) override;
  Result<void*> allocPinned(size_t bytes) override;
  Status freePinned(void* ptr) override;
  Result<void*> allocDevice(size_t bytes) override;
  Status freeDevice(void* ptr) override;
  Result<StreamId> createStream() override;
  Status destroyStream(StreamId stream) override;
  Status copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) override;
  Status reduceAsync(StreamId stream, const ReduceWork& work) override;
  Result<EventId> recordEvent(StreamId stream) override;
  Result<bool> queryEvent(EventId event) override;
  Status releaseEvent(EventId event) override;
  Status synchronize(StreamId stream) override;

 private:
  using StreamPtr = std::shared_ptr<simdev::SimStream>;

  struct Event {
    StreamId stream = 0;
    uint64_t mark = 0;  // the SimStream event
    // Null once the stream was destroyed: everything before the mark has finished by then, and
    // finalError holds what the stream ended with.
    StreamPtr live;
    Status finalError;
  };

  Result<StreamPtr> findStream(StreamId stream);
  // The stream's sticky error as the DeviceError this interface reports.
  Status deviceError(StreamId stream, const Status& error) const;
  Status checkReduceBounds(const ReduceWork& work) const;  // caller holds mutex_
  // InvalidArgument when `ptr` lies in another sim device's memory that this device cannot
  // reach: any other device's for a kernel, another vendor's for a copy.
  Status checkReach(const void* ptr, const char* what, bool kernel) const;
  SimOwner owner() const { return SimOwner{this, info_.vendor, name_}; }

  const ReduceKernel kernel_;
  const SimFaults faults_;
  const simdev::StreamTiming timing_;  // with faults_.slowStreamUs folded in
  const std::string name_;
  DeviceInfo info_;
  Capabilities caps_;
  std::atomic<uint64_t> copies_{0};

  mutable std::mutex mutex_;
  std::unordered_map<StreamId, StreamPtr> streams_;  // guarded by mutex_
  std::unordered_map<EventId, Event> events_;        // guarded by mutex_
  // By ImportedBuffer::id; unique_ptr so that the mapping's address never moves.
  std::unordered_map<uint64_t, std::unique_ptr<simdev::SimAllocation>> imports_;  // mutex_
  std::unordered_map<void*, size_t> pinned_;       // guarded by mutex_; pointer -> bytes
  std::unordered_map<void*, size_t> allocations_;  // guarded by mutex_; allocDevice()'s
  DeviceRanges ranges_;      // guarded by mutex_; imports, device and pinned allocations
  StreamId nextStream_ = 1;  // guarded by mutex_
  EventId nextEvent_ = 1;    // guarded by mutex_
  uint64_t nextImport_ = 1;  // guarded by mutex_
};

}  // namespace hc::device
