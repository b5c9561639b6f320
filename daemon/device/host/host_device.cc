#include "daemon/device/host/host_device.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace hc::device {
namespace {

constexpr size_t kPinnedAlignment = 4096;

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(' ', colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "cpu";
}

uint64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
}

// True when [a, a+n) and [b, b+n) share a byte.
bool overlaps(const void* a, const void* b, size_t n) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return n > 0 && x < y + n && y < x + n;
}

}  // namespace

BufferHandle hostBufferHandle(const void* ptr, uint64_t size) {
  BufferHandle handle;
  handle.type = MemoryType::Host;
  handle.bytes.resize(sizeof(ptr));
  std::memcpy(handle.bytes.data(), &ptr, sizeof(ptr));
  handle.size = size;
  return handle;
}

HostDevice::HostDevice(ReduceKernel kernel, int index) : kernel_(std::move(kernel)) {
  info_.index = index;
  info_.vendor = Vendor::Host;
  info_.backend = "host";
  info_.model = cpuModel();
  info_.memoryBytes = physicalMemoryBytes();
  caps_.ipcImport = false;
  caps_.reduceKernels = static_cast<bool>(kernel_);
  caps_.streamOrdering = false;
  caps_.pinnedStaging = false;
  caps_.transportMemory = {MemoryType::Host};
}

HostDevice::~HostDevice() {
  for (auto& [ptr, bytes] : pinned_) std::free(ptr);
}

Result<ImportedBuffer> HostDevice::importBuffer(const BufferHandle& handle) {
  if (handle.type != MemoryType::Host) {
    return invalidArgument(std::string("host device cannot import a ") +
                           memoryTypeName(handle.type) +
                           " handle: it imports host memory only (an in-process address)");
  }
  if (handle.fd >= 0 || handle.bytes.size() != sizeof(void*)) {
    return invalidArgument(
        "host device imports in-process host handles only (an 8-byte address, no fd); map "
        "shared segments before importing");
  }
  const void* ptr = nullptr;
  std::memcpy(&ptr, handle.bytes.data(), sizeof(ptr));
  if (ptr == nullptr && handle.size > 0) {
    return invalidArgument("host handle has a null address");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = const_cast<void*>(ptr);
  buffer.size = handle.size;
  buffer.id = nextImport_++;
  imports_.emplace(buffer.id, Import{ptr, handle.size});
  return buffer;
}

Status HostDevice::releaseBuffer(ImportedBuffer& buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = imports_.find(buffer.id);
  if (it == imports_.end() || it->second.ptr != buffer.ptr) {
    return notFound("buffer " + std::to_string(buffer.id) + " is not imported by this device");
  }
  imports_.erase(it);
  buffer = ImportedBuffer{};
  return okStatus();
}

Result<void*> HostDevice::allocPinned(size_t bytes) {
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
  return ptr;
}

Status HostDevice::freePinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pinned_.erase(ptr) == 0) return notFound("freePinned: not a pinned allocation");
  }
  std::free(ptr);
  return okStatus();
}

Result<void*> HostDevice::allocDevice(size_t) {
  return unavailable("the host has no device memory: use allocPinned");
}

Status HostDevice::freeDevice(void*) { return notFound("freeDevice: the host allocates none"); }

Result<StreamId> HostDevice::createStream() {
  std::lock_guard<std::mutex> lock(mutex_);
  StreamId id = nextStream_++;
  streams_.insert(id);
  return id;
}

Status HostDevice::destroyStream(StreamId stream) {
  // Work ran at enqueue, so nothing is pending to wait for.
  std::lock_guard<std::mutex> lock(mutex_);
  if (streams_.erase(stream) == 0) return notFound("unknown stream " + std::to_string(stream));
  return okStatus();
}

Status HostDevice::checkStream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (streams_.count(stream) == 0) return notFound("unknown stream " + std::to_string(stream));
  return okStatus();
}

Status HostDevice::copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) {
  HC_RETURN_IF_ERROR(checkStream(stream));
  if (bytes == 0 || dst == src) return okStatus();
  if (dst == nullptr || src == nullptr) return invalidArgument("copyAsync with a null buffer");
  if (overlaps(dst, src, bytes)) return invalidArgument("copyAsync ranges partially overlap");
  std::memcpy(dst, src, bytes);
  return okStatus();
}

Status HostDevice::reduceAsync(StreamId stream, const ReduceWork& work) {
  HC_RETURN_IF_ERROR(checkStream(stream));
  if (!kernel_) return Status(Code::DeviceError, "host device has no reduction kernel");
  if (work.inputs.empty() || work.outputs.empty()) {
    return invalidArgument("reduceAsync needs at least one input and one output");
  }
  if (!work.scalars.empty() && work.scalars.size() != work.inputs.size()) {
    return invalidArgument("reduceAsync: " + std::to_string(work.scalars.size()) + " scalars for " +
                           std::to_string(work.inputs.size()) + " inputs");
  }
  if (work.nRanks == 0) return invalidArgument("reduceAsync: nRanks is 0");
  if (work.count == 0) return okStatus();
  for (const void* in : work.inputs) {
    if (in == nullptr) return invalidArgument("reduceAsync: null input");
  }
  for (void* out : work.outputs) {
    if (out == nullptr) return invalidArgument("reduceAsync: null output");
  }
  kernel_(work, 0, work.count);
  return okStatus();
}

Result<EventId> HostDevice::recordEvent(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (streams_.count(stream) == 0) return notFound("unknown stream " + std::to_string(stream));
  EventId id = nextEvent_++;
  events_.insert(id);
  return id;
}

Result<bool> HostDevice::queryEvent(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.count(event) == 0) return notFound("unknown event " + std::to_string(event));
  return true;
}

Status HostDevice::releaseEvent(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.erase(event) == 0) return notFound("unknown event " + std::to_string(event));
  return okStatus();
}

Status HostDevice::synchronize(StreamId stream) { return checkStream(stream); }

}  // namespace hc::device
