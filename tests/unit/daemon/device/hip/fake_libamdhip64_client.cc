// A stand-in for libamdhip64.so.5 with the entry points the client's HIP seam
// (client/src/runtime_hip.cc) calls, loaded by path by hip_client_runtime_fake_test. Its SONAME is
// the runtime's, so once loaded the seam's dlopen(RTLD_NOLOAD) finds it as it would the real one
// in a ROCm build of PyTorch. Compiled against the HIP 5.2 headers, so the seam's own declaration
// of the ABI is checked against the headers' (attribute numbers, hipPointerAttribute_t, the
// memory type values of 5.x), not against itself. It is no GPU and proves nothing about one.
//
// - "Device allocations" are host memory the test declares (hcFakeHipAddDeviceAllocation), or VMM
//   allocations the fake makes (hcFakeHipCreateVmmAllocation: a memfd mapped shared, as
//   hipMemCreate + hipMemMap would; exporting it hands out a duplicate of the memfd).
// - Failed calls set the thread's last error, as the runtime does; hipGetLastError clears it.
// - hipIpcGetMemHandle and the VMM export work through the current device, which must be the
//   allocation's; hipIpcGetMemHandle refuses VMM memory, hipMemRetainAllocationHandle takes
//   nothing else.
// The streams and host registration the seam also resolves answer hipErrorNotSupported: the
// tests here are about pointers, exports and PCI addresses.
#include <hip/hip_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "tests/unit/daemon/device/memfd_allocation.h"

namespace {

constexpr int kDevices = 2;
constexpr int kRuntimeVersion = 50'200'000;  // HIP 5.2, matching the headers compiled against

struct Allocation {
  size_t bytes = 0;
  int device = 0;
  uint64_t bufferId = 0;
  std::shared_ptr<hc::device::testing::MemfdAllocation> vmm;  // null for hipMalloc-style memory
  int requestedHandleType = 0;
};

// A retained hipMemGenericAllocationHandle_t: the address of one of these.
struct Retained {
  int fd = -1;  // our own duplicate
  int requestedHandleType = 0;
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::set<Retained*> retained;
  std::map<int, std::vector<int>> pci;  // device -> {domain, bus, slot}
};

State& state() {
  static State s;
  return s;
}

thread_local hipError_t lastError = hipSuccess;
thread_local int currentDevice = 0;

hipError_t fail(hipError_t error) {
  lastError = error;
  return error;
}

// The allocation holding `ptr`, or null. Called with the mutex held.
const Allocation* find(const void* ptr, uintptr_t* base) {
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  for (const auto& [start, allocation] : state().allocations) {
    if (at >= start && at < start + allocation.bytes) {
      *base = start;
      return &allocation;
    }
  }
  return nullptr;
}

}  // namespace

extern "C" {

// Test controls.
void hcFakeHipAddDeviceAllocation(const void* base, uint64_t bytes, int device, uint64_t bufferId) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(base)] = Allocation{bytes, device, bufferId};
}
void* hcFakeHipCreateVmmAllocation(uint64_t bytes, int device, uint64_t bufferId,
                                   int requestedHandleType) {
  auto memory = std::make_shared<hc::device::testing::MemfdAllocation>(bytes, "hc-fake-hip-vmm");
  if (memory->view() == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(memory->view())] =
      Allocation{bytes, device, bufferId, memory, requestedHandleType};
  return memory->view();
}
void hcFakeHipRemoveDeviceAllocation(const void* base) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations.erase(reinterpret_cast<uintptr_t>(base));
}
void hcFakeHipSetPciAddress(int device, int domain, int bus, int slot) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().pci[device] = {domain, bus, slot};
}
int hcFakeHipRetainedHandles() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int>(state().retained.size());
}

hipError_t hipGetLastError() {
  hipError_t error = lastError;
  lastError = hipSuccess;
  return error;
}
hipError_t hipPeekAtLastError() { return lastError; }
const char* hipGetErrorName(hipError_t error) {
  switch (error) {
    case hipSuccess:
      return "hipSuccess";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorNotSupported:
      return "hipErrorNotSupported";
    default:
      return "hipErrorUnknown";
  }
}
hipError_t hipRuntimeGetVersion(int* version) {
  *version = kRuntimeVersion;
  return hipSuccess;
}
hipError_t hipGetDevice(int* device) {
  *device = currentDevice;
  return hipSuccess;
}
hipError_t hipSetDevice(int device) {
  if (device < 0 || device >= kDevices) return fail(hipErrorInvalidDevice);
  currentDevice = device;
  return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int device) {
  if (device < 0 || device >= kDevices) return fail(hipErrorInvalidDevice);
  std::vector<int> address = {0, 0xC1 + device, 0};  // 0000:c1:00.0, 0000:c2:00.0
  std::lock_guard<std::mutex> lock(state().mutex);
  if (auto it = state().pci.find(device); it != state().pci.end()) address = it->second;
  switch (attribute) {
    case hipDeviceAttributePciDomainID:
      *value = address[0];
      return hipSuccess;
    case hipDeviceAttributePciBusId:
      *value = address[1];
      return hipSuccess;
    case hipDeviceAttributePciDeviceId:
      *value = address[2];
      return hipSuccess;
    default:
      return fail(hipErrorInvalidValue);
  }
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  uintptr_t base = 0;
  const Allocation* allocation = find(ptr, &base);
  if (allocation == nullptr) return fail(hipErrorInvalidValue);
  std::memset(attributes, 0, sizeof(*attributes));
  attributes->memoryType = hipMemoryTypeDevice;  // the 5.x value, from the 5.2 headers
  attributes->device = allocation->device;
  attributes->devicePointer = const_cast<void*>(ptr);
  return hipSuccess;
}

hipError_t hipPointerGetAttribute(void* data, hipPointer_attribute attribute, hipDeviceptr_t ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  uintptr_t base = 0;
  const Allocation* allocation = find(ptr, &base);
  if (allocation == nullptr || attribute != HIP_POINTER_ATTRIBUTE_BUFFER_ID) {
    return fail(hipErrorInvalidValue);
  }
  *static_cast<uint64_t*>(data) = allocation->bufferId;
  return hipSuccess;
}

hipError_t hipMemGetAddressRange(hipDeviceptr_t* base, size_t* bytes, hipDeviceptr_t ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  uintptr_t start = 0;
  const Allocation* allocation = find(ptr, &start);
  if (allocation == nullptr) return fail(hipErrorInvalidValue);
  *base = reinterpret_cast<hipDeviceptr_t>(start);
  *bytes = allocation->bytes;
  return hipSuccess;
}

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == state().allocations.end() || it->second.vmm != nullptr) {
    return fail(hipErrorInvalidValue);
  }
  if (it->second.device != currentDevice) return fail(hipErrorInvalidDevice);
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  const uint64_t bytes = it->second.bytes;
  std::memcpy(handle->reserved, &ptr, sizeof(ptr));
  std::memcpy(handle->reserved + 8, &bytes, sizeof(bytes));
  return hipSuccess;
}

hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* handle, void* addr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  uintptr_t base = 0;
  const Allocation* allocation = find(addr, &base);
  if (allocation == nullptr || allocation->vmm == nullptr) return fail(hipErrorInvalidValue);
  auto* retained = new Retained{dup(allocation->vmm->fd()), allocation->requestedHandleType};
  state().retained.insert(retained);
  *handle = reinterpret_cast<hipMemGenericAllocationHandle_t>(retained);
  return hipSuccess;
}

hipError_t hipMemExportToShareableHandle(void* shareableHandle,
                                         hipMemGenericAllocationHandle_t handle,
                                         hipMemAllocationHandleType type,
                                         unsigned long long flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto* retained = reinterpret_cast<Retained*>(handle);
  if (state().retained.count(retained) == 0 || type != hipMemHandleTypePosixFileDescriptor ||
      flags != 0) {
    return fail(hipErrorInvalidValue);
  }
  if ((retained->requestedHandleType & hipMemHandleTypePosixFileDescriptor) == 0) {
    return fail(hipErrorNotSupported);
  }
  *static_cast<int*>(shareableHandle) = dup(retained->fd);
  return hipSuccess;
}

hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto* retained = reinterpret_cast<Retained*>(handle);
  if (state().retained.erase(retained) == 0) return fail(hipErrorInvalidValue);
  close(retained->fd);
  delete retained;
  return hipSuccess;
}

// Resolved by the seam, not exercised by the tests that load this fake.
hipError_t hipStreamGetFlags(hipStream_t, unsigned int*) { return fail(hipErrorNotSupported); }
hipError_t hipLaunchHostFunc(hipStream_t, hipHostFn_t, void*) { return fail(hipErrorNotSupported); }
hipError_t hipStreamWaitValue32(hipStream_t, void*, uint32_t, unsigned int, uint32_t) {
  return fail(hipErrorNotSupported);
}
hipError_t hipHostGetDevicePointer(void**, void*, unsigned int) {
  return fail(hipErrorNotSupported);
}
hipError_t hipHostRegister(void*, size_t, unsigned int) { return fail(hipErrorNotSupported); }
hipError_t hipStreamSynchronize(hipStream_t) { return fail(hipErrorNotSupported); }

}  // extern "C"
