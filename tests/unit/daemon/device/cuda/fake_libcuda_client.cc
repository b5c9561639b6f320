// The fake driver's client half: the entry points the client's CUDA seam (client/src/
// runtime_cuda.cc) calls, over "device allocations" the tests declare (hcFakeCudaAdd...), VMM
// allocations they create (hcFakeCudaCreateVmmAllocation: a memfd mapped shared, as if by
// cuMemCreate + cuMemMap; exporting it hands out a duplicate of the memfd) and host memory
// registered with it. Device pointers of registered host memory are the host addresses
// themselves. As the driver does, cuMemHostRegister and cuIpcGetMemHandle need a current
// context, and cuPointerGetAttribute does not; cuIpcGetMemHandle refuses VMM memory, and
// cuMemRetainAllocationHandle takes nothing else.
//
// Streams (fake_streams.h): host functions, waits on registered host memory and the tests'
// "kernels" (hcFakeCudaEnqueueKernel) go on the stream's queue and run in order on its worker;
// the NULL stream is the legacy stream of the calling thread's current context, and needs one.
// Every item is logged (hcFakeCudaCopyLog; HC_FAKE_CUDA_LOG names a file for it too). A stream
// marked capturing (hcFakeCudaSetCapturing) answers cuStreamIsCapturing with ACTIVE.
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "tests/unit/daemon/device/cuda/fake_libcuda_state.h"

using namespace hc::device::fake_cuda::driver;  // NOLINT: the fake's own state

namespace {

// The allocation holding `ptr`, or null.
const DeviceAllocation* findAllocation(CUdeviceptr ptr, CUdeviceptr* base) {
  for (const auto& [start, allocation] : state().allocations) {
    if (ptr >= start && ptr < start + allocation.bytes) {
      *base = start;
      return &allocation;
    }
  }
  return nullptr;
}

bool inRegisteredHostMemory(uintptr_t address) {
  for (const auto& [start, bytes] : state().registered) {
    if (address >= start && address < start + bytes) return true;
  }
  return false;
}

struct LastWait {
  int count = 0;
  CUdeviceptr address = 0;
  uint32_t value = 0;
} lastWait;

}  // namespace

extern "C" {

// Test controls (fake_cuda.h).
void hcFakeCudaAddDeviceAllocation(const void* base, uint64_t bytes, int device, uint64_t bufferId,
                                   int managed) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(base)] =
      DeviceAllocation{bytes, device, bufferId, managed != 0};
}
void hcFakeCudaRemoveDeviceAllocation(const void* base) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations.erase(reinterpret_cast<uintptr_t>(base));
}
// A VMM allocation of `bytes` on `device`, mapped; null on failure. requestedHandleTypes is what
// its CUmemAllocationProp asked for (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1, to be sharable).
void* hcFakeCudaCreateVmmAllocation(uint64_t bytes, int device, uint64_t bufferId,
                                    int requestedHandleTypes) {
  auto memory = std::make_shared<hc::device::testing::MemfdAllocation>(bytes, "hc-fake-cuda-vmm");
  if (memory->view() == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(memory->view())] =
      DeviceAllocation{bytes, device, bufferId, false, memory, requestedHandleTypes};
  return memory->view();
}
// Where the attributes put `device` on the PCI bus from now on.
void hcFakeCudaSetPciAddress(int device, int domain, int bus, int slot) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().pciOverride[device] = {domain, bus, slot};
}
// What the framework does before it calls the client: its runtime creates the primary context.
int hcFakeCudaRetainPrimary(int device) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (device < 0 || device >= static_cast<int>(state().gpus.size())) return 0;
  ++state().gpus[device].context.retains;
  return 1;
}
int hcFakeCudaLastWait(uint64_t* address, uint32_t* value) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *address = lastWait.address;
  *value = lastWait.value;
  return lastWait.count;
}
// A "kernel" on `stream` (0: the legacy stream of the current context): sleeps delayMs, then runs
// fn(arg) on the stream's worker. A CUresult.
int hcFakeCudaEnqueueKernel(CUstream stream, const char* label, int delayMs, void (*fn)(void*),
                            void* arg) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  queue->kernel(label != nullptr ? label : "unnamed", delayMs, fn, arg);
  return CUDA_SUCCESS;
}
// Marks the stream as being captured into a graph (capturing != 0) or not. A CUresult.
int hcFakeCudaSetCapturing(CUstream stream, int capturing) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  queue->setCapturing(capturing != 0);
  return CUDA_SUCCESS;
}
// The stream's name in the log ("stream3", "legacy0"), copied as snprintf would; -1 when the
// stream is unknown.
int hcFakeCudaStreamName(CUstream stream, char* out, size_t capacity) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return -1;
  return std::snprintf(out, capacity, "%s", queue->name().c_str());
}
// The log so far, copied as snprintf would (fake_streams.h, FakeStreamLog::copy).
size_t hcFakeCudaCopyLog(char* out, size_t capacity) { return streamLog().copy(out, capacity); }
// Adds a line "<seq> note <text>" (what the test did, between the streams' lines); its seq.
uint64_t hcFakeCudaLogNote(const char* text) { return streamLog().append("note", text); }

CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = contextStack.empty() ? nullptr : contextStack.back();
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (device < 0 || device >= static_cast<int>(state().gpus.size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *flags = 0;
  *active = state().gpus[device].context.retains > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  CUdeviceptr base = 0;
  const DeviceAllocation* allocation = findAllocation(ptr, &base);
  if (allocation == nullptr) {
    if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE && inRegisteredHostMemory(ptr)) {
      *static_cast<unsigned*>(data) = CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;  // not CUDA's
  }
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = CU_MEMORYTYPE_DEVICE;  // managed memory says so too
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<bool*>(data) = allocation->managed;  // one byte
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = allocation->bufferId;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = allocation->device;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(ptr);
  if (it == state().allocations.end() || it->second.managed || it->second.vmm != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  const uint64_t magic = hc::device::fake_cuda::kIpcMagic;
  const uint64_t bytes = it->second.bytes;
  std::memcpy(handle->reserved, &magic, 8);
  std::memcpy(handle->reserved + 8, &ptr, 8);
  std::memcpy(handle->reserved + 16, &bytes, 8);
  if (it->second.backing != nullptr) {
    const uint64_t pid = static_cast<uint64_t>(getpid());
    const uint64_t fd = static_cast<uint64_t>(it->second.backing->fd());
    std::memcpy(handle->reserved + 24, &pid, 8);
    std::memcpy(handle->reserved + 32, &fd, 8);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  CUdeviceptr base = 0;
  const DeviceAllocation* allocation = findAllocation(reinterpret_cast<uintptr_t>(addr), &base);
  if (allocation == nullptr || allocation->vmm == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // A handle of its own, released with cuMemRelease (fake_libcuda.cc).
  *handle = state().nextVmm++;
  state().vmm[*handle] = VmmAllocation{dup(allocation->vmm->fd()), allocation->bytes,
                                       allocation->requestedHandleTypes};
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().vmm.find(handle);
  if (it == state().vmm.end()) return CUDA_ERROR_INVALID_VALUE;
  std::memset(prop, 0, sizeof(*prop));
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->requestedHandleTypes =
      static_cast<CUmemAllocationHandleType>(it->second.requestedHandleTypes);
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().vmm.find(handle);
  if (it == state().vmm.end() || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((it->second.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  *static_cast<int*>(shareableHandle) = dup(it->second.fd);
  return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* userData) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  queue->hostFunction(fn, userData);
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr address, cuuint32_t value,
                                unsigned int flags) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (flags != CU_STREAM_WAIT_VALUE_GEQ || !inRegisteredHostMemory(address)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    ++lastWait.count;
    lastWait.address = address;
    lastWait.value = value;
  }
  // The device pointer of registered host memory is its host address (cuMemHostGetDevicePointer).
  queue->waitValue32(reinterpret_cast<const volatile uint32_t*>(address), value,
                     hc::device::testing::WaitCompare::CudaGeq);
  return CUDA_SUCCESS;
}

// A copy from "device" memory (host memory here) to host memory, in stream order.
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (dst == nullptr || src == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  queue->copy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  *status = queue->capturing() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void* ptr, size_t bytes, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != (CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  if (inRegisteredHostMemory(at)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  state().registered[at] = bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* device, void* ptr, unsigned int flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  if (flags != 0 || !inRegisteredHostMemory(at)) return CUDA_ERROR_INVALID_VALUE;
  *device = at;
  return CUDA_SUCCESS;
}

}  // extern "C"
