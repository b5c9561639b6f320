// HipDevice imports: clients' GPU allocations mapped into the daemon by legacy HIP IPC handle.
// Each import is checked against the size the client claims, so that a client cannot make the
// daemon read or write past the end of what it actually shared (on ROCm a GPU memory fault
// aborts the faulting process by default: here, the daemon).
#include <spdlog/spdlog.h>

#include <cstring>
#include <string>

#include "daemon/device/hip/hip_api.h"
#include "daemon/device/hip/hip_device.h"

namespace hc::device {

Result<ImportedBuffer> HipDevice::importBuffer(const BufferHandle& handle) {
  if (handle.type != MemoryType::Hip) {
    return invalidArgument("HIP GPU " + std::to_string(ordinal_) + " cannot import a " +
                           memoryTypeName(handle.type) +
                           " handle: it imports hip memory (a legacy IPC handle)");
  }
  if (handle.size == 0) return invalidArgument("HIP import of an allocation of 0 bytes");
  if (handle.fd >= 0) {
    return invalidArgument("HIP imports take a legacy IPC handle, not an fd");
  }
  if (handle.bytes.size() != sizeof(hipIpcMemHandle_t)) {
    return invalidArgument("a HIP IPC handle has " + std::to_string(sizeof(hipIpcMemHandle_t)) +
                           " bytes, not " + std::to_string(handle.bytes.size()));
  }
  hipIpcMemHandle_t ipcHandle;
  std::memcpy(&ipcHandle, handle.bytes.data(), sizeof(ipcHandle));
  const HipApi& hip = *api_;
  HC_RETURN_IF_ERROR(makeCurrent());
  void* ptr = nullptr;
  // Lazy peer access: the allocation may live on another GPU of the node; the runtime enables
  // peer access to it on first use instead of failing. The flag's value depends on the ABI.
  HC_HIP_TRY(hip, hipIpcOpenMemHandle, &ptr, ipcHandle, hip.ipcOpenFlags());

  // The handle names a whole allocation; the runtime knows its real extent.
  hipDeviceptr_t base = nullptr;
  size_t allocationBytes = 0;
  const hipError_t ranged = hip.hipMemGetAddressRange(&base, &allocationBytes, ptr);
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  const auto begin = reinterpret_cast<uintptr_t>(base);
  Status refused;
  if (ranged != hipSuccess) {
    refused = hip.toStatus(ranged, "hipMemGetAddressRange");
  } else if (at < begin || at - begin > allocationBytes ||
             allocationBytes - (at - begin) < handle.size) {
    refused = invalidArgument("the HIP IPC handle's allocation holds " +
                              std::to_string(at < begin ? 0 : allocationBytes - (at - begin)) +
                              " bytes, fewer than the " + std::to_string(handle.size) +
                              " the client claims");
  }
  if (!refused.isOk()) {
    const hipError_t closed = hip.hipIpcCloseMemHandle(ptr);
    if (closed != hipSuccess) {
      spdlog::warn("HIP GPU {}: {}", ordinal_, hip.describe(closed, "hipIpcCloseMemHandle"));
    }
    return refused;
  }

  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = ptr;
  buffer.size = handle.size;
  buffer.id = nextImport_++;
  imports_.emplace(buffer.id, ptr);
  return buffer;
}

Status HipDevice::releaseBuffer(ImportedBuffer& buffer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(buffer.id);
    if (it == imports_.end() || it->second != buffer.ptr) {
      return notFound("buffer " + std::to_string(buffer.id) + " is not imported by HIP GPU " +
                      std::to_string(ordinal_));
    }
    imports_.erase(it);
  }
  HC_RETURN_IF_ERROR(makeCurrent());
  HC_HIP_TRY(*api_, hipIpcCloseMemHandle, buffer.ptr);
  buffer = ImportedBuffer{};
  return okStatus();
}

}  // namespace hc::device
