// CudaDevice imports: clients' GPU allocations mapped into the daemon, by legacy IPC handle or by
// VMM POSIX fd. Each import is checked against the size the client claims, so that a client
// cannot make the daemon read or write past the end of what it actually shared.
#include <spdlog/spdlog.h>

#include <cstring>
#include <string>

#include "daemon/device/cuda/cuda_api.h"
#include "daemon/device/cuda/cuda_device.h"

namespace hc::device {

Result<ImportedBuffer> CudaDevice::importBuffer(const BufferHandle& handle) {
  if (handle.type != MemoryType::Cuda) {
    return invalidArgument("CUDA GPU " + std::to_string(ordinal_) + " cannot import a " +
                           memoryTypeName(handle.type) +
                           " handle: it imports cuda memory (a legacy IPC handle, or a VMM fd)");
  }
  if (handle.size == 0) return invalidArgument("CUDA import of an allocation of 0 bytes");
  if (handle.fd >= 0) return importVmmFd(handle);
  return importLegacyIpc(handle);
}

Result<ImportedBuffer> CudaDevice::importLegacyIpc(const BufferHandle& handle) {
  if (handle.bytes.size() != CU_IPC_HANDLE_SIZE) {
    return invalidArgument("a CUDA IPC handle has " + std::to_string(CU_IPC_HANDLE_SIZE) +
                           " bytes, not " + std::to_string(handle.bytes.size()));
  }
  CUipcMemHandle ipcHandle;
  std::memcpy(&ipcHandle, handle.bytes.data(), CU_IPC_HANDLE_SIZE);
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  CUdeviceptr ptr = 0;
  // Lazy peer access: the allocation may live on another GPU of the node; the driver enables
  // peer access to it on first use instead of failing.
  HC_CUDA_TRY(d, ipcOpenMemHandle, &ptr, ipcHandle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);

  // The handle names a whole allocation; the driver knows its real extent.
  CUdeviceptr base = 0;
  size_t allocationBytes = 0;
  const CUresult ranged = d.memGetAddressRange(&base, &allocationBytes, ptr);
  Status refused;
  if (ranged != CUDA_SUCCESS) {
    refused = d.toStatus(ranged, d.memGetAddressRange.name);
  } else if (ptr < base || ptr - base > allocationBytes ||
             allocationBytes - (ptr - base) < handle.size) {
    refused = invalidArgument(
        "the CUDA IPC handle's allocation holds " + std::to_string(allocationBytes - (ptr - base)) +
        " bytes, fewer than the " + std::to_string(handle.size) + " the client claims");
  }
  if (!refused.isOk()) {
    const CUresult closed = d.ipcCloseMemHandle(ptr);
    if (closed != CUDA_SUCCESS) {
      spdlog::warn("CUDA GPU {}: {}", ordinal_, d.describe(closed, d.ipcCloseMemHandle.name));
    }
    return refused;
  }

  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  buffer.size = handle.size;
  buffer.id = nextImport_++;
  imports_.emplace(buffer.id, Import{ptr, 0, false});
  return buffer;
}

Result<ImportedBuffer> CudaDevice::importVmmFd(const BufferHandle& handle) {
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  // The driver reads the fd and does not keep it: the caller still owns and closes it.
  CUmemGenericAllocationHandle allocation = 0;
  HC_CUDA_TRY(d, memImportFromShareableHandle, &allocation,
              reinterpret_cast<void*>(static_cast<uintptr_t>(handle.fd)),
              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

  // Undo in reverse order on any failure below.
  CUdeviceptr va = 0;
  size_t mapped = 0;
  bool isMapped = false;
  auto fail = [&](Status status) -> Result<ImportedBuffer> {
    if (isMapped) (void)d.memUnmap(va, mapped);
    if (va != 0) (void)d.memAddressFree(va, mapped);
    (void)d.memRelease(allocation);
    return status;
  };

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cuDevice_;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  CUresult result =
      d.memGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (result != CUDA_SUCCESS) return fail(d.toStatus(result, d.memGetAllocationGranularity.name));
  if (granularity == 0) granularity = 1;
  // VMM allocations are whole multiples of the granularity, so a claim that fits the allocation
  // still fits once rounded up, and one that does not makes cuMemMap refuse.
  mapped = (handle.size + granularity - 1) / granularity * granularity;
  if (mapped < handle.size) return fail(invalidArgument("CUDA VMM import size overflows"));
  result = d.memAddressReserve(&va, mapped, granularity, 0, 0);
  if (result != CUDA_SUCCESS) {
    va = 0;
    return fail(d.toStatus(result, d.memAddressReserve.name));
  }
  result = d.memMap(va, mapped, 0, allocation, 0);
  if (result == CUDA_ERROR_INVALID_VALUE) {
    return fail(invalidArgument("the CUDA VMM allocation is smaller than the " +
                                std::to_string(handle.size) + " bytes the client claims (" +
                                d.describe(result, d.memMap.name) + ")"));
  }
  if (result != CUDA_SUCCESS) return fail(d.toStatus(result, d.memMap.name));
  isMapped = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cuDevice_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  result = d.memSetAccess(va, mapped, &access, 1);
  if (result != CUDA_SUCCESS) return fail(d.toStatus(result, d.memSetAccess.name));
  // The mapping holds the allocation from here on: unmapping it at release frees our share.
  result = d.memRelease(allocation);
  if (result != CUDA_SUCCESS) {
    spdlog::warn("CUDA GPU {}: {}", ordinal_, d.describe(result, d.memRelease.name));
  }

  std::lock_guard<std::mutex> lock(mutex_);
  ImportedBuffer buffer;
  buffer.ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  buffer.size = handle.size;
  buffer.id = nextImport_++;
  imports_.emplace(buffer.id, Import{va, mapped, true});
  return buffer;
}

Status CudaDevice::releaseBuffer(ImportedBuffer& buffer) {
  Import import;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(buffer.id);
    if (it == imports_.end() ||
        it->second.devicePtr != static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buffer.ptr))) {
      return notFound("buffer " + std::to_string(buffer.id) + " is not imported by CUDA GPU " +
                      std::to_string(ordinal_));
    }
    import = it->second;
    imports_.erase(it);
  }
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  HC_RETURN_IF_ERROR(unmapImport(import));
  buffer = ImportedBuffer{};
  return okStatus();
}

// Runs with the context current.
Status CudaDevice::unmapImport(const Import& import) {
  const CudaDriver& d = *driver_;
  if (!import.vmm) {
    HC_CUDA_TRY(d, ipcCloseMemHandle, import.devicePtr);
    return okStatus();
  }
  HC_CUDA_TRY(d, memUnmap, import.devicePtr, import.mappedBytes);
  HC_CUDA_TRY(d, memAddressFree, import.devicePtr, import.mappedBytes);
  return okStatus();
}

}  // namespace hc::device
