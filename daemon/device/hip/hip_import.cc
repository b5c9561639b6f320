// HipDevice imports: clients' GPU allocations mapped into the daemon, by legacy HIP IPC handle or,
// for VMM allocations (hipMemCreate, which legacy IPC cannot export), by POSIX fd. Each import is
// checked against the size the client claims, so that a client cannot make the daemon read or
// write past the end of what it actually shared (on ROCm a GPU memory fault aborts the faulting
// process by default: here, the daemon).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "daemon/device/hip/hip_api.h"
#include "daemon/device/hip/hip_device.h"

namespace hc::device {

Result<ImportedBuffer> HipDevice::importBuffer(const BufferHandle& handle) {
  if (handle.type != MemoryType::Hip) {
    return invalidArgument("HIP GPU " + std::to_string(ordinal_) + " cannot import a " +
                           memoryTypeName(handle.type) +
                           " handle: it imports hip memory (a legacy IPC handle, or a VMM fd)");
  }
  if (handle.size == 0) return invalidArgument("HIP import of an allocation of 0 bytes");
  if (handle.fd < 0) return importLegacyIpc(handle);
  if (!handle.bytes.empty()) {
    return invalidArgument("a HIP handle is either a legacy IPC handle or a VMM fd, not both");
  }
  if (!api_->hasVmm()) {
    return invalidArgument("HIP GPU " + std::to_string(ordinal_) + ": " + api_->libraryName +
                           " has no VMM calls (hipMemImportFromShareableHandle, HIP 5.1+), so "
                           "VMM fd handles cannot be imported");
  }
  return importVmmFd(handle);
}

Result<ImportedBuffer> HipDevice::importLegacyIpc(const BufferHandle& handle) {
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
  return remember(Import{ptr, 0, false}, handle.size);
}

Result<ImportedBuffer> HipDevice::importVmmFd(const BufferHandle& handle) {
  const HipApi& hip = *api_;
  HC_RETURN_IF_ERROR(makeCurrent());
  // The fd travels by value in the pointer, as with CUDA; the runtime reads it and does not keep
  // it: the caller still owns and closes it.
  hipMemGenericAllocationHandle_t allocation = nullptr;
  HC_HIP_TRY(hip, hipMemImportFromShareableHandle, &allocation,
             reinterpret_cast<void*>(static_cast<uintptr_t>(handle.fd)),
             hipMemHandleTypePosixFileDescriptor);

  // Undo in reverse order on any failure below.
  void* va = nullptr;
  size_t mapped = 0;
  bool isMapped = false;
  auto fail = [&](Status status) -> Result<ImportedBuffer> {
    if (isMapped) (void)hip.hipMemUnmap(va, mapped);
    if (va != nullptr) (void)hip.hipMemAddressFree(va, mapped);
    (void)hip.hipMemRelease(allocation);
    return status;
  };

  // The client names the allocation's mapped range (hipMemGetAddressRange), a whole number of
  // granules, so its size is mapped as it is, rounded up to a page only. The granularity is not
  // asked for: hipMemGetAllocationGranularity takes a hipMemAllocationProp, whose layout HIP 6.0
  // changed. A size the runtime cannot map is refused by hipMemAddressReserve or hipMemMap.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  mapped = (handle.size + page - 1) / page * page;
  if (mapped < handle.size) return fail(invalidArgument("HIP VMM import size overflows"));
  hipError_t error = hip.hipMemAddressReserve(&va, mapped, 0, nullptr, 0);
  if (error != hipSuccess) {
    va = nullptr;
    return fail(hip.toStatus(error, "hipMemAddressReserve"));
  }
  error = hip.hipMemMap(va, mapped, 0, allocation, 0);
  if (error == hipErrorInvalidValue) {
    return fail(invalidArgument("the HIP VMM allocation cannot be mapped as the " +
                                std::to_string(handle.size) +
                                " bytes the client claims: it is smaller, or that is not a whole "
                                "number of its granules (" +
                                hip.describe(error, "hipMemMap") + ")"));
  }
  if (error != hipSuccess) return fail(hip.toStatus(error, "hipMemMap"));
  isMapped = true;
  hipMemAccessDesc access{};
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = ordinal_;
  access.flags = hipMemAccessFlagsProtReadWrite;
  error = hip.hipMemSetAccess(va, mapped, &access, 1);
  if (error != hipSuccess) return fail(hip.toStatus(error, "hipMemSetAccess"));
  // The mapping holds the allocation from here on: unmapping it at release frees our share.
  error = hip.hipMemRelease(allocation);
  if (error != hipSuccess) {
    spdlog::warn("HIP GPU {}: {}", ordinal_, hip.describe(error, "hipMemRelease"));
  }
  return remember(Import{va, mapped, true}, handle.size);
}

Result<ImportedBuffer> HipDevice::remember(const Import& import, uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = import.ptr;
  buffer.size = size;
  buffer.id = nextImport_++;
  imports_.emplace(buffer.id, import);
  return buffer;
}

Status HipDevice::releaseBuffer(ImportedBuffer& buffer) {
  Import import;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(buffer.id);
    if (it == imports_.end() || it->second.ptr != buffer.ptr) {
      return notFound("buffer " + std::to_string(buffer.id) + " is not imported by HIP GPU " +
                      std::to_string(ordinal_));
    }
    import = it->second;
    imports_.erase(it);
  }
  HC_RETURN_IF_ERROR(makeCurrent());
  HC_RETURN_IF_ERROR(unmapImport(import));
  buffer = ImportedBuffer{};
  return okStatus();
}

Status HipDevice::unmapImport(const Import& import) {
  const HipApi& hip = *api_;
  if (!import.vmm) {
    HC_HIP_TRY(hip, hipIpcCloseMemHandle, import.ptr);
    return okStatus();
  }
  HC_HIP_TRY(hip, hipMemUnmap, import.ptr, import.mappedBytes);
  HC_HIP_TRY(hip, hipMemAddressFree, import.ptr, import.mappedBytes);
  return okStatus();
}

}  // namespace hc::device
