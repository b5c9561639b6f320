// A stand-in for libamdhip64.so.5 that a daemon loads as its HIP runtime: the integration tests put
// a link of that name to this library in a folder on one daemon's LD_LIBRARY_PATH, ahead of
// Debian's real runtime, so that daemon finds AMD GPUs and maps its HIP ranks' device memory. It
// exports every entry point the HIP backend resolves (daemon/device/hip/hip_api.cc), the VMM ones
// included, and is no GPU: it proves nothing about one.
//
// The calls HipDevice makes are the in-process fake of hip_device_test (fake_hip_runtime.cc):
// device memory is host memory, copies are memcpy, a kernel launch runs the kernels' host math at
// once, events are complete when recorded, and a legacy IPC handle of the client-side fake's
// hipMalloc memory names a memfd, mapped through /proc. What only a loaded runtime is asked
// (hipInit, the version, the device count) and how its GPUs present themselves are answered here:
// fake_hip::kDevices GPUs named "Fake HIP GPU <n>", at the PCI addresses the client-side fake
// reports, so the daemon matches a rank's GPU to its own. hipModuleLoadData takes only a clang
// offload bundle, the form of the daemon's embedded kernels.
//
// A daemon calls from several threads and the in-process fake keeps unguarded state, so every
// call holds one lock; none of them blocks.
#include <cstdio>
#include <cstring>
#include <mutex>

#include "daemon/device/hip/hip_api.h"
#include "tests/unit/daemon/device/hip/fake_hip_ipc.h"
#include "tests/unit/daemon/device/hip/fake_hip_runtime.h"

namespace {

using hc::device::HipApi;
using hc::device::testing::FakeHipRuntime;
namespace fake_hip = hc::device::fake_hip;

constexpr char kOffloadBundleMagic[] = "__CLANG_OFFLOAD_BUNDLE__";

std::mutex& callMutex() {
  static std::mutex mutex;
  return mutex;
}

// Made at the first call, never destroyed: the daemon's devices call into it until exit.
const HipApi& fakeApi() {
  static FakeHipRuntime* runtime = new FakeHipRuntime(fake_hip::kRuntimeVersion / 10'000'000);
  return *runtime->api();
}

// Calls the in-process fake's entry point, under the lock.
template <auto Entry, typename... Args>
auto call(Args... args) {
  std::lock_guard<std::mutex> lock(callMutex());
  return (fakeApi().*Entry)(args...);
}

bool validDevice(int device) { return device >= 0 && device < fake_hip::kDevices; }

bool initialized = false;  // guarded by callMutex()

}  // namespace

extern "C" {

hipError_t hipInit(unsigned int flags) {
  if (flags != 0) return hipErrorInvalidValue;
  std::lock_guard<std::mutex> lock(callMutex());
  initialized = true;
  return hipSuccess;
}
hipError_t hipRuntimeGetVersion(int* version) {
  *version = fake_hip::kRuntimeVersion;
  return hipSuccess;
}
hipError_t hipGetDeviceCount(int* count) {
  std::lock_guard<std::mutex> lock(callMutex());
  if (!initialized) return hipErrorNotInitialized;
  *count = fake_hip::kDevices;
  return hipSuccess;
}
const char* hipGetErrorName(hipError_t error) { return call<&HipApi::hipGetErrorName>(error); }
const char* hipGetErrorString(hipError_t error) { return call<&HipApi::hipGetErrorString>(error); }

hipError_t hipSetDevice(int device) {
  return validDevice(device) ? call<&HipApi::hipSetDevice>(device) : hipErrorInvalidDevice;
}
hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  return validDevice(ordinal) ? call<&HipApi::hipDeviceGet>(device, ordinal)
                              : hipErrorInvalidDevice;
}
hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int device) {
  return validDevice(device) ? call<&HipApi::hipDeviceGetAttribute>(value, attribute, device)
                             : hipErrorInvalidDevice;
}
hipError_t hipDeviceGetName(char* name, int length, hipDevice_t device) {
  if (!validDevice(device)) return hipErrorInvalidDevice;
  std::snprintf(name, static_cast<size_t>(length), "Fake HIP GPU %d", device);
  return hipSuccess;
}
hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  return validDevice(device) ? call<&HipApi::hipDeviceTotalMem>(bytes, device)
                             : hipErrorInvalidDevice;
}
// Upper case, as the runtime spells it.
hipError_t hipDeviceGetPCIBusId(char* busId, int length, int device) {
  if (!validDevice(device)) return hipErrorInvalidDevice;
  std::snprintf(busId, static_cast<size_t>(length), "0000:%02X:00.0",
                fake_hip::kFirstPciBus + device);
  return hipSuccess;
}
hipError_t hipMemGetInfo(size_t* freeBytes, size_t* total) {
  return call<&HipApi::hipMemGetInfo>(freeBytes, total);
}

hipError_t hipIpcOpenMemHandle(void** ptr, hipIpcMemHandle_t handle, unsigned int flags) {
  return call<&HipApi::hipIpcOpenMemHandle>(ptr, handle, flags);
}
hipError_t hipIpcCloseMemHandle(void* ptr) { return call<&HipApi::hipIpcCloseMemHandle>(ptr); }
hipError_t hipMemGetAddressRange(hipDeviceptr_t* base, size_t* bytes, hipDeviceptr_t ptr) {
  return call<&HipApi::hipMemGetAddressRange>(base, bytes, ptr);
}
hipError_t hipHostMalloc(void** ptr, size_t bytes, unsigned int flags) {
  return call<&HipApi::hipHostMalloc>(ptr, bytes, flags);
}
hipError_t hipHostFree(void* ptr) { return call<&HipApi::hipHostFree>(ptr); }
hipError_t hipMalloc(void** ptr, size_t bytes) { return call<&HipApi::hipMalloc>(ptr, bytes); }
hipError_t hipFree(void* ptr) { return call<&HipApi::hipFree>(ptr); }

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  return call<&HipApi::hipStreamCreateWithFlags>(stream, flags);
}
hipError_t hipStreamDestroy(hipStream_t stream) { return call<&HipApi::hipStreamDestroy>(stream); }
hipError_t hipStreamSynchronize(hipStream_t stream) {
  return call<&HipApi::hipStreamSynchronize>(stream);
}
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                          hipStream_t stream) {
  return call<&HipApi::hipMemcpyAsync>(dst, src, bytes, kind, stream);
}
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  return call<&HipApi::hipEventCreateWithFlags>(event, flags);
}
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return call<&HipApi::hipEventRecord>(event, stream);
}
hipError_t hipEventQuery(hipEvent_t event) { return call<&HipApi::hipEventQuery>(event); }
hipError_t hipEventDestroy(hipEvent_t event) { return call<&HipApi::hipEventDestroy>(event); }

hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  if (image == nullptr ||
      std::memcmp(image, kOffloadBundleMagic, sizeof(kOffloadBundleMagic) - 1) != 0) {
    return hipErrorInvalidImage;
  }
  return call<&HipApi::hipModuleLoadData>(module, image);
}
hipError_t hipModuleUnload(hipModule_t module) { return call<&HipApi::hipModuleUnload>(module); }
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* name) {
  return call<&HipApi::hipModuleGetFunction>(function, module, name);
}
hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned int gridX, unsigned int gridY,
                                 unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                                 unsigned int blockZ, unsigned int sharedBytes, hipStream_t stream,
                                 void** params, void** extra) {
  return call<&HipApi::hipModuleLaunchKernel>(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                                              sharedBytes, stream, params, extra);
}

// VMM imports (HIP 5.1+).
hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle, void* osHandle,
                                           hipMemAllocationHandleType type) {
  return call<&HipApi::hipMemImportFromShareableHandle>(handle, osHandle, type);
}
hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr,
                                unsigned long long flags) {
  return call<&HipApi::hipMemAddressReserve>(ptr, size, alignment, addr, flags);
}
hipError_t hipMemAddressFree(void* ptr, size_t size) {
  return call<&HipApi::hipMemAddressFree>(ptr, size);
}
hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags) {
  return call<&HipApi::hipMemMap>(ptr, size, offset, handle, flags);
}
hipError_t hipMemUnmap(void* ptr, size_t size) { return call<&HipApi::hipMemUnmap>(ptr, size); }
hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
  return call<&HipApi::hipMemSetAccess>(ptr, size, desc, count);
}
hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  return call<&HipApi::hipMemRelease>(handle);
}

}  // extern "C"
