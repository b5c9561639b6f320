// A stand-in for libamdhip64.so.5 with the entry points the client's HIP seam
// (client/src/runtime_hip.cc) calls, loaded by path by hip_client_runtime_fake_test. Its SONAME is
// the runtime's, so once loaded the seam's dlopen(RTLD_NOLOAD) finds it as it would the real one
// in a ROCm build of PyTorch. Compiled against the HIP 5.2 headers, so the seam's own declaration
// of the ABI is checked against the headers' (attribute numbers, hipPointerAttribute_t, the
// memory type values of 5.x), not against itself. It is no GPU and proves nothing about one.
//
// - "Device allocations" are host memory the test declares (hcFakeHipAddDeviceAllocation),
//   hipMalloc memory (a memfd mapped shared) or VMM allocations the fake makes
//   (hcFakeHipCreateVmmAllocation: a memfd mapped shared, as hipMemCreate + hipMemMap would;
//   exporting it hands out a duplicate of the memfd).
// - A legacy IPC handle is fake_hip_ipc.h's: the address and size, and for hipMalloc memory
//   {pid, memfd}, which the daemon's fake HIP runtime opens through /proc, so that a daemon maps
//   this memory as it would a GPU allocation.
// - Failed calls set the thread's last error, as the runtime does; hipGetLastError clears it.
// - hipIpcGetMemHandle and the VMM export work through the current device, which must be the
//   allocation's; hipIpcGetMemHandle refuses VMM memory, hipMemRetainAllocationHandle takes
//   nothing else.
// - Streams are queues run in order by a worker thread each (../fake_streams.h, shared with the
//   fake CUDA driver): host functions, waits on registered host memory (hipHostRegister; its
//   device pointer is the host address) and the tests' "kernels" (hcFakeHipEnqueueKernel). The
//   NULL stream is the current device's null stream; its implicit synchronisation with blocking
//   streams is not modelled. Every item is logged (hcFakeHipCopyLog; HC_FAKE_HIP_LOG names a
//   file for it too). A stream marked capturing (hcFakeHipSetCapturing) answers
//   hipStreamIsCapturing with hipStreamCaptureStatusActive.
#include <hip/hip_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "tests/unit/daemon/device/fake_streams.h"
#include "tests/unit/daemon/device/hip/fake_hip_ipc.h"
#include "tests/unit/daemon/device/memfd_allocation.h"

namespace {

using hc::device::fake_hip::kDevices;
using hc::device::fake_hip::kRuntimeVersion;

struct Allocation {
  size_t bytes = 0;
  int device = 0;
  uint64_t bufferId = 0;
  std::shared_ptr<hc::device::testing::MemfdAllocation> vmm;  // null for hipMalloc-style memory
  int requestedHandleType = 0;
  std::shared_ptr<hc::device::testing::MemfdAllocation> backing;  // hipMalloc's memory
};

// A retained hipMemGenericAllocationHandle_t: the address of one of these.
struct Retained {
  int fd = -1;  // our own duplicate
  int requestedHandleType = 0;
};

using hc::device::testing::FakeStream;

// A hipStream_t made by hipStreamCreate*: the address of one of these.
struct Stream {
  std::unique_ptr<FakeStream> queue;
  unsigned flags = 0;
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::set<Retained*> retained;
  std::map<int, std::vector<int>> pci;  // device -> {domain, bus, slot}
  std::set<Stream*> streams;
  int streamsMade = 0;  // names the streams in the log: stream1, stream2, ...
  // The null stream of each device: made on first use, kept for the process's life.
  std::map<int, FakeStream*> nullStreams;
  std::map<uintptr_t, size_t> registered;  // host memory registered: address -> bytes
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

hc::device::testing::FakeStreamLog& streamLog() {
  // Never destroyed: null streams, which live as long as the process, write to it.
  static auto* log = new hc::device::testing::FakeStreamLog("HC_FAKE_HIP_LOG");
  return *log;
}

// The queue of `stream`: one made by hipStreamCreate*, or for null the current device's null
// stream. Null when the stream is unknown.
FakeStream* queueOf(hipStream_t stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (stream != nullptr) {
    auto* made = reinterpret_cast<Stream*>(stream);
    return state().streams.count(made) == 1 ? made->queue.get() : nullptr;
  }
  FakeStream*& queue = state().nullStreams[currentDevice];
  if (queue == nullptr) queue = new FakeStream("null" + std::to_string(currentDevice), streamLog());
  return queue;
}

// Called with the mutex held.
bool inRegisteredHostMemory(uintptr_t address) {
  for (const auto& [start, bytes] : state().registered) {
    if (address >= start && address < start + bytes) return true;
  }
  return false;
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
  // 0000:c1:00.0, 0000:c2:00.0, where the daemon's fake puts them too.
  std::vector<int> address = {0, hc::device::fake_hip::kFirstPciBus + device, 0};
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
  static_assert(sizeof(handle->reserved) == hc::device::fake_hip::kIpcHandleBytes);
  hc::device::fake_hip::IpcHandle out;
  out.address = reinterpret_cast<uintptr_t>(ptr);
  out.bytes = it->second.bytes;
  if (it->second.backing != nullptr) {
    out.magic = hc::device::fake_hip::kIpcMagic;
    out.pid = static_cast<uint64_t>(getpid());
    out.fd = static_cast<uint64_t>(it->second.backing->fd());
  }
  hc::device::fake_hip::writeIpcHandle(out, handle->reserved);
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

// Test controls for streams (as the fake CUDA driver's, fake_cuda.h).
// A "kernel" on `stream` (null: the current device's null stream): sleeps delayMs, then runs
// fn(arg) on the stream's worker. A hipError_t.
int hcFakeHipEnqueueKernel(hipStream_t stream, const char* label, int delayMs, void (*fn)(void*),
                           void* arg) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return hipErrorInvalidHandle;
  queue->kernel(label != nullptr ? label : "unnamed", delayMs, fn, arg);
  return hipSuccess;
}
int hcFakeHipSetCapturing(hipStream_t stream, int capturing) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return hipErrorInvalidHandle;
  queue->setCapturing(capturing != 0);
  return hipSuccess;
}
// The stream's name in the log ("stream1", "null0"), as snprintf would; -1 when unknown.
int hcFakeHipStreamName(hipStream_t stream, char* out, size_t capacity) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return -1;
  return std::snprintf(out, capacity, "%s", queue->name().c_str());
}
size_t hcFakeHipCopyLog(char* out, size_t capacity) { return streamLog().copy(out, capacity); }
uint64_t hcFakeHipLogNote(const char* text) { return streamLog().append("note", text); }

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~hipStreamNonBlocking) != 0) return fail(hipErrorInvalidValue);
  std::lock_guard<std::mutex> lock(state().mutex);
  auto* made = new Stream;
  made->queue = std::make_unique<FakeStream>("stream" + std::to_string(++state().streamsMade),
                                             streamLog());
  made->flags = flags;
  state().streams.insert(made);
  *stream = reinterpret_cast<hipStream_t>(made);
  return hipSuccess;
}
hipError_t hipStreamCreate(hipStream_t* stream) { return hipStreamCreateWithFlags(stream, 0); }
// Returns once the stream's queued work has run.
hipError_t hipStreamDestroy(hipStream_t stream) {
  auto* made = reinterpret_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().streams.erase(made) == 0) return fail(hipErrorInvalidHandle);
  }
  delete made;  // outside the lock: it waits for the worker
  return hipSuccess;
}
hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto* made = reinterpret_cast<Stream*>(stream);
  if (stream == nullptr || state().streams.count(made) == 0) return fail(hipErrorInvalidHandle);
  *flags = made->flags;
  return hipSuccess;
}
hipError_t hipStreamSynchronize(hipStream_t stream) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return fail(hipErrorInvalidHandle);
  queue->synchronize();
  return hipSuccess;
}
hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus* status) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return fail(hipErrorInvalidHandle);
  *status = queue->capturing() ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
  return hipSuccess;
}
hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
  if (fn == nullptr) return fail(hipErrorInvalidValue);
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return fail(hipErrorInvalidHandle);
  queue->hostFunction(fn, userData);
  return hipSuccess;
}
hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags,
                                uint32_t mask) {
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return fail(hipErrorInvalidHandle);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (flags != hipStreamWaitValueGte ||
        !inRegisteredHostMemory(reinterpret_cast<uintptr_t>(ptr))) {
      return fail(hipErrorInvalidValue);
    }
  }
  queue->waitValue32(static_cast<const volatile uint32_t*>(ptr), value,
                     hc::device::testing::WaitCompare::HipGte, mask);
  return hipSuccess;
}
// Device memory of the current device, as hipMalloc gives it (host memory here, a memfd).
hipError_t hipMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return fail(hipErrorInvalidValue);
  auto memory = std::make_shared<hc::device::testing::MemfdAllocation>(bytes, "hc-fake-hip-mem");
  if (memory->view() == nullptr) return fail(hipErrorOutOfMemory);
  std::lock_guard<std::mutex> lock(state().mutex);
  static uint64_t nextBufferId = 1ull << 40;
  state().allocations[reinterpret_cast<uintptr_t>(memory->view())] =
      Allocation{bytes, currentDevice, nextBufferId++, nullptr, 0, memory};
  *ptr = memory->view();
  return hipSuccess;
}
hipError_t hipFree(void* ptr) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == state().allocations.end() || it->second.backing == nullptr) {
    return fail(hipErrorInvalidValue);
  }
  state().allocations.erase(it);
  return hipSuccess;
}

// A copy from "device" memory (host memory here) to host memory, in stream order.
hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream) {
  if (dst == nullptr || src == nullptr) return fail(hipErrorInvalidValue);
  FakeStream* queue = queueOf(stream);
  if (queue == nullptr) return fail(hipErrorInvalidHandle);
  queue->copy(dst, src, bytes);
  return hipSuccess;
}
hipError_t hipHostRegister(void* ptr, size_t bytes, unsigned int flags) {
  if (ptr == nullptr || bytes == 0 || (flags & hipHostRegisterMapped) == 0) {
    return fail(hipErrorInvalidValue);
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  if (inRegisteredHostMemory(at)) return fail(hipErrorHostMemoryAlreadyRegistered);
  state().registered[at] = bytes;
  return hipSuccess;
}
// Registered host memory is seen by the device at its host address.
hipError_t hipHostGetDevicePointer(void** devicePtr, void* hostPtr, unsigned int flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (flags != 0 || !inRegisteredHostMemory(reinterpret_cast<uintptr_t>(hostPtr))) {
    return fail(hipErrorInvalidValue);
  }
  *devicePtr = hostPtr;
  return hipSuccess;
}

}  // extern "C"
