// HostDevice: the node's CPUs and host memory behind the Device interface, for ranks that run
// on host memory and as the staging side of every GPU path.
// Depends on device.h and hc_common only; the reduction math comes in as a kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "daemon/device/device.h"

namespace hc::device {

// The only handle form HostDevice imports: an address in this process (BufferHandle with
// MemoryType::Host, `bytes` = the pointer's bytes, no fd). Shared segments and cross-memory
// attach are resolved to addresses by the session before they reach a device.
BufferHandle hostBufferHandle(const void* ptr, uint64_t size);

// Copies and reductions run synchronously inside copyAsync()/reduceAsync(), on the caller's
// thread, so streams are trivially ordered and events complete when recorded
// (capabilities().streamOrdering is false). Pinned memory is page-aligned, pre-faulted host
// memory: there is no DMA engine to register it with.
// Thread-safe: bookkeeping is under one mutex, never held while data moves, so reductions on
// different threads run in parallel.
class HostDevice final : public Device {
 public:
  using ReduceKernel = device::ReduceKernel;  // device.h says what it does

  // A null kernel means no reductions: capabilities().reduceKernels is false and reduceAsync()
  // returns DeviceError.
  explicit HostDevice(ReduceKernel kernel, int index = 0);
  // Frees pinned memory the caller did not free; imports need no unmapping.
  ~HostDevice() override;
  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;

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
  struct Import {
    const void* ptr;
    uint64_t size;
  };

  Status checkStream(StreamId stream);

  const ReduceKernel kernel_;
  DeviceInfo info_;
  Capabilities caps_;

  std::mutex mutex_;
  std::unordered_set<StreamId> streams_;          // guarded by mutex_
  std::unordered_set<EventId> events_;            // guarded by mutex_; all complete
  std::unordered_map<uint64_t, Import> imports_;  // guarded by mutex_; by ImportedBuffer::id
  std::unordered_map<void*, size_t> pinned_;      // guarded by mutex_; pointer -> bytes
  StreamId nextStream_ = 1;                       // guarded by mutex_
  EventId nextEvent_ = 1;                         // guarded by mutex_
  uint64_t nextImport_ = 1;                       // guarded by mutex_
};

}  // namespace hc::device
