#include "daemon/session/device_regions.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace hc::session {
namespace {

Result<device::MemoryType> memoryType(uint8_t wire) {
  switch (static_cast<ipc::DeviceMemory>(wire)) {
    case ipc::DeviceMemory::Sim: return device::MemoryType::Sim;
    case ipc::DeviceMemory::Cuda: return device::MemoryType::Cuda;
    case ipc::DeviceMemory::Hip: return device::MemoryType::Hip;
  }
  return invalidArgument("unknown device memory type " + std::to_string(wire));
}

Result<device::Vendor> vendor(uint8_t wire) {
  switch (static_cast<ipc::DeviceVendor>(wire)) {
    case ipc::DeviceVendor::Nvidia: return device::Vendor::Nvidia;
    case ipc::DeviceVendor::Amd: return device::Vendor::Amd;
  }
  return invalidArgument("unknown device vendor " + std::to_string(wire));
}

// The backend a device must have to take memory of `type`.
const char* backendFor(device::MemoryType type) {
  switch (type) {
    case device::MemoryType::Sim: return "sim";
    case device::MemoryType::Cuda: return "cuda";
    case device::MemoryType::Hip: return "hip";
    case device::MemoryType::Host: return "host";
  }
  return "?";
}

// The device a MemRegister names: by PCI address when the client gave one (ordinals differ
// between processes that see different *_VISIBLE_DEVICES), else by the client's ordinal, as
// clients before the address did.
Result<device::Device*> namedDevice(const ipc::MemRegisterFrame& request, device::Vendor v,
                                    const device::DeviceRegistry& registry) {
  if ((request.flags & ipc::kMemRegisterPciAddress) == 0) return registry.find(v, request.device);
  auto dev = registry.findByPciAddress(v, request.pciAddress);
  if (!dev.isOk()) return invalidArgument(dev.status().message());
  if ((*dev)->info().index != request.device) {
    spdlog::debug(
        "MemRegister: {} device at PCI address {} is {}:{} here, ordinal {} in the "
        "client (its *_VISIBLE_DEVICES differ); the PCI address decides",
        device::vendorName(v), device::formatPciAddress(request.pciAddress), device::vendorName(v),
        (*dev)->info().index, request.device);
  }
  return dev;
}

// What a client passes as a device allocation's handle goes to the driver: a memfd (sim), the
// driver's own file (CUDA VMM) or a dma-buf (ROCm), whose inodes are regular, character-device
// or anonymous (no file type bits). A pipe, socket, directory or block device is none of those,
// and a driver that read from a pipe nobody writes to would block the IPC thread for good.
Status checkHandleFd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return systemError("fstat of a device allocation's handle", errno);
  const mode_t type = st.st_mode & S_IFMT;
  if (type == 0 || type == S_IFREG || type == S_IFCHR) return okStatus();
  const char* what = type == S_IFIFO   ? "a pipe"
                     : type == S_IFSOCK ? "a socket"
                     : type == S_IFDIR  ? "a directory"
                     : type == S_IFBLK  ? "a block device"
                                        : "not a device allocation";
  return invalidArgument(std::string("the descriptor of a device allocation's handle is ") + what);
}

}  // namespace

DeviceRegion::DeviceRegion(device::Device* device, device::ImportedBuffer buffer, uint32_t id,
                           uint64_t allocationId, metrics::DaemonMetrics* metrics)
    : device_(device), buffer_(buffer), id_(id), allocationId_(allocationId), metrics_(metrics) {
  if (metrics_ != nullptr) metrics_->deviceImported(buffer_.size);
}

DeviceRegion::~DeviceRegion() {
  // Every op that used the region synchronized its copies before it completed, so nothing is
  // pending on the mapping here.
  const uint64_t bytes = buffer_.size;  // releaseBuffer clears the buffer it is given
  if (Status s = device_->releaseBuffer(buffer_); !s.isOk()) {
    spdlog::warn("{}: release failed: {}", describe(), s.message());
  }
  if (metrics_ != nullptr) metrics_->deviceReleased(bytes);
}

std::string DeviceRegion::describe() const {
  const device::DeviceInfo& info = device_->info();
  return device::deviceLabel(info) + " region " + std::to_string(id_) + " (allocation " +
         std::to_string(allocationId_) + ")";
}

Result<uint32_t> DeviceRegions::add(const ipc::MemRegisterFrame& request, int fd,
                                    const device::DeviceRegistry& registry) {
  if (regions_.size() >= kMaxRegions) {
    return Status{Code::NoResource, "more than " + std::to_string(kMaxRegions) +
                                        " device allocations registered by one client"};
  }
  auto type = memoryType(request.memoryType);
  if (!type.isOk()) return type.status();
  auto v = vendor(request.vendor);
  if (!v.isOk()) return v.status();
  auto dev = namedDevice(request, *v, registry);
  if (!dev.isOk()) return dev.status();
  const device::DeviceInfo& info = (*dev)->info();
  if (info.backend != backendFor(*type)) {
    return invalidArgument(std::string("device ") + device::vendorName(*v) + ":" +
                           std::to_string(info.index) + " is a " + info.backend +
                           " device; the allocation is " + backendFor(*type) + " memory");
  }
  if (request.bytes == 0) return invalidArgument("device allocation of 0 bytes");
  if (maxBytes_ != 0 && request.bytes > maxBytes_ - std::min(bytes_, maxBytes_)) {
    return Status{Code::NoResource,
                  "registering " + std::to_string(request.bytes) +
                      " more bytes of device memory "
                      "would take this client past devices.max_imported_bytes_per_client (" +
                      std::to_string(maxBytes_) + "; " + std::to_string(bytes_) +
                      " registered): free or deregister device memory"};
  }
  const auto kind = static_cast<ipc::HandleKind>(request.handleKind);
  if (kind != ipc::HandleKind::LegacyIpc && kind != ipc::HandleKind::Fd) {
    return invalidArgument("unknown handle kind " + std::to_string(request.handleKind));
  }
  if ((kind == ipc::HandleKind::Fd) != (fd >= 0)) {
    return invalidArgument(kind == ipc::HandleKind::Fd
                               ? "an fd handle came without a descriptor"
                               : "a legacy IPC handle came with a descriptor");
  }
  if (kind == ipc::HandleKind::LegacyIpc && !legacyIpcAllowed_) {
    return Status{Code::PermissionDenied,
                  "legacy IPC handles are refused here (devices.legacy_ipc = false): use VMM "
                  "memory exported as a POSIX fd (cuMemCreate / hipMemCreate)"};
  }
  if (fd >= 0) HC_RETURN_IF_ERROR(checkHandleFd(fd));
  device::BufferHandle handle;
  handle.type = *type;
  handle.size = request.bytes;
  handle.fd = fd;
  if (kind == ipc::HandleKind::LegacyIpc) {
    handle.bytes.assign(request.handle, request.handle + ipc::kDeviceHandleBytes);
  }
  auto imported = (*dev)->importBuffer(handle);
  if (!imported.isOk()) return imported.status();
  if (imported->size < request.bytes) {
    // The device maps what the handle really holds; a client claiming more would make the
    // daemon's bounds checks trust bytes that are not there.
    device::ImportedBuffer b = *imported;
    [[maybe_unused]] Status s = (*dev)->releaseBuffer(b);
    return invalidArgument("the allocation holds " + std::to_string(imported->size) +
                           " bytes, not the " + std::to_string(request.bytes) + " claimed");
  }
  imported->size = request.bytes;
  while (nextId_ == 0 || regions_.count(nextId_) != 0) ++nextId_;
  const uint32_t id = nextId_++;
  regions_[id] =
      std::make_shared<DeviceRegion>(*dev, *imported, id, request.allocationId, metrics_);
  bytes_ += request.bytes;
  return id;
}

Status DeviceRegions::remove(uint32_t id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return notFound("device region " + std::to_string(id) + " is not registered");
  }
  bytes_ -= it->second->bytes();
  regions_.erase(it);  // unmapped here, or when the last op using it ends
  return okStatus();
}

DeviceRegionPtr DeviceRegions::find(uint32_t id) const {
  auto it = regions_.find(id);
  return it == regions_.end() ? nullptr : it->second;
}

}  // namespace hc::session
