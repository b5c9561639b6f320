// SimDevice: construction, teardown, imports, pinned memory, streams and events. The work itself
// (copyAsync, reduceAsync) is in sim_device_work.cc.
#include "daemon/device/sim/sim_device.h"

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace hc::device {
namespace {

constexpr size_t kPinnedAlignment = 4096;

simdev::StreamTiming withFaults(simdev::StreamTiming timing, const SimFaults& faults) {
  timing.extraDelayUs += faults.slowStreamUs;
  return timing;
}

std::string deviceName(Vendor vendor, int index) {
  return std::string("sim ") + vendorName(vendor) + ":" + std::to_string(index);
}

}  // namespace

SimDevice::SimDevice(Vendor vendor, int index, simdev::StreamTiming timing, SimFaults faults,
                     ReduceKernel kernel, uint64_t memoryBytes)
    : kernel_(std::move(kernel)),
      faults_(faults),
      timing_(withFaults(timing, faults)),
      name_(deviceName(vendor, index)) {
  HC_CHECK(vendor == Vendor::Nvidia || vendor == Vendor::Amd);
  info_.index = index;
  info_.vendor = vendor;
  info_.backend = "sim";
  info_.model = vendor == Vendor::Nvidia ? "simulated NVIDIA GPU" : "simulated AMD GPU";
  info_.memoryBytes = memoryBytes;
  info_.pciBusId = "";
  caps_.ipcImport = true;
  caps_.reduceKernels = static_cast<bool>(kernel_);
  caps_.streamOrdering = true;
  caps_.pinnedStaging = false;
  caps_.peerCopy = true;
  // Empty: the transport cannot read sim memory, so the data path stages through host memory
  // (as with a UCX built without GPU memory types).
  caps_.transportMemory = {};
}

SimDevice::~SimDevice() {
  // Reverse order of dependence: events reference streams, queued work references imports and
  // pinned memory. Each SimStream's destructor aborts its waits and finishes what is queued.
  events_.clear();
  streams_.clear();
  SimAddressSpace& space = SimAddressSpace::instance();
  for (auto& [id, allocation] : imports_) space.remove(allocation->data());
  imports_.clear();
  for (auto& [ptr, bytes] : pinned_) std::free(ptr);
  for (auto& [ptr, bytes] : allocations_) {
    space.remove(ptr);
    std::free(ptr);
  }
}

Result<ImportedBuffer> SimDevice::importBuffer(const BufferHandle& handle) {
  if (handle.type != MemoryType::Sim) {
    return invalidArgument(name_ + " cannot import a " + memoryTypeName(handle.type) +
                           " handle: it imports sim handles only (a sealed memfd and its size)");
  }
  if (handle.fd < 0 || handle.size == 0) {
    return invalidArgument(name_ + " imports sim handles with a memfd and a size > 0; got fd " +
                           std::to_string(handle.fd) + ", size " + std::to_string(handle.size));
  }
  // Maps outside the lock: mmap may take a while and other streams keep going meanwhile.
  auto mapped = simdev::SimAllocation::import(handle.fd, handle.size);
  if (!mapped) return mapped.status();
  auto allocation = std::make_unique<simdev::SimAllocation>(std::move(*mapped));
  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = allocation->data();
  buffer.size = allocation->bytes();
  buffer.id = nextImport_++;
  ranges_.add(buffer.ptr, buffer.size, "sim import " + std::to_string(buffer.id));
  SimAddressSpace::instance().add(buffer.ptr, buffer.size, owner());
  imports_.emplace(buffer.id, std::move(allocation));
  return buffer;
}

Status SimDevice::releaseBuffer(ImportedBuffer& buffer) {
  std::unique_ptr<simdev::SimAllocation> allocation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(buffer.id);
    if (it == imports_.end() || it->second->data() != buffer.ptr) {
      return notFound("buffer " + std::to_string(buffer.id) + " is not imported by " + name_);
    }
    allocation = std::move(it->second);
    imports_.erase(it);
    ranges_.remove(buffer.ptr);
    SimAddressSpace::instance().remove(buffer.ptr);
  }
  buffer = ImportedBuffer{};
  return okStatus();  // `allocation` unmaps here, outside the lock
}

Result<void*> SimDevice::allocPinned(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocPinned of 0 bytes");
  size_t rounded = (bytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
  if (rounded < bytes) return invalidArgument("allocPinned size overflows");
  void* ptr = std::aligned_alloc(kPinnedAlignment, rounded);
  if (ptr == nullptr) {
    return Status(Code::NoResource, "allocPinned: no memory for " + std::to_string(bytes) + " B");
  }
  // Fault every page in now: first touch runs far below copy speed and must not land on the
  // data path.
  std::memset(ptr, 0, rounded);
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_.emplace(ptr, rounded);
  ranges_.add(ptr, rounded, "a pinned allocation");
  return ptr;
}

Status SimDevice::freePinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pinned_.erase(ptr) == 0) return notFound("freePinned: not a pinned allocation");
    ranges_.remove(ptr);
  }
  std::free(ptr);
  return okStatus();
}

Result<void*> SimDevice::allocDevice(size_t bytes) {
  if (bytes == 0) return invalidArgument("allocDevice of 0 bytes");
  size_t rounded = (bytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
  if (rounded < bytes) return invalidArgument("allocDevice size overflows");
  void* ptr = std::aligned_alloc(kPinnedAlignment, rounded);
  if (ptr == nullptr) {
    return Status(Code::NoResource, name_ + ": no memory for " + std::to_string(bytes) + " B");
  }
  std::memset(ptr, 0, rounded);  // first touch off the data path, as for pinned memory
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.emplace(ptr, rounded);
  ranges_.add(ptr, rounded, "a device allocation");
  SimAddressSpace::instance().add(ptr, rounded, owner());
  return ptr;
}

Status SimDevice::freeDevice(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(ptr) == 0) return notFound("freeDevice: not a device allocation");
    ranges_.remove(ptr);
    SimAddressSpace::instance().remove(ptr);
  }
  std::free(ptr);
  return okStatus();
}

Result<StreamId> SimDevice::createStream() {
  auto stream = std::make_shared<simdev::SimStream>(timing_);
  std::lock_guard<std::mutex> lock(mutex_);
  StreamId id = nextStream_++;
  streams_.emplace(id, std::move(stream));
  return id;
}

Status SimDevice::destroyStream(StreamId stream) {
  StreamPtr doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
    doomed = std::move(it->second);
    streams_.erase(it);
  }
  // A failed stream is destroyed like any other: that is what its owner is told to do.
  Status ended = doomed->synchronize();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, event] : events_) {
    if (event.stream != stream) continue;
    event.live.reset();
    event.finalError = ended;
  }
  return okStatus();  // the worker joins when `doomed` goes, after the lock is released
}

Result<SimDevice::StreamPtr> SimDevice::findStream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
  return it->second;
}

Status SimDevice::deviceError(StreamId stream, const Status& error) const {
  if (error.code() == Code::DeviceError) return error;
  return Status(Code::DeviceError,
                name_ + " stream " + std::to_string(stream) + " failed: " + error.toString());
}

Result<EventId> SimDevice::recordEvent(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return notFound("unknown stream " + std::to_string(stream));
  EventId id = nextEvent_++;
  events_.emplace(id, Event{stream, it->second->record(), it->second, Status{}});
  return id;
}

Result<bool> SimDevice::queryEvent(EventId event) {
  Event copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end()) return notFound("unknown event " + std::to_string(event));
    copy = it->second;
  }
  if (copy.live == nullptr) {
    if (!copy.finalError.isOk()) return deviceError(copy.stream, copy.finalError);
    return true;
  }
  // Sticky, as on a GPU: once the stream failed every query on it reports the failure.
  if (copy.live->failed()) return deviceError(copy.stream, copy.live->error());
  return copy.live->done(copy.mark);
}

Status SimDevice::releaseEvent(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.erase(event) == 0) return notFound("unknown event " + std::to_string(event));
  return okStatus();
}

Status SimDevice::synchronize(StreamId stream) {
  auto found = findStream(stream);
  if (!found) return found.status();
  Status error = (*found)->synchronize();
  if (!error.isOk()) return deviceError(stream, error);
  return okStatus();
}

}  // namespace hc::device
