#include "tests/unit/daemon/device/hip/fake_hip_runtime.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/device/kernels/reduce_math.h"
#include "tests/unit/daemon/device/hip/fake_hip_ipc.h"

namespace hc::device::testing {
namespace {

FakeHipState* g_state = nullptr;

// Distinct non-null handles for the opaque types; never dereferenced by the device.
template <typename Handle>
Handle newHandle() {
  return reinterpret_cast<Handle>(new int(0));
}
template <typename Handle>
void deleteHandle(Handle handle) {
  delete reinterpret_cast<int*>(handle);
}

// hipFunction_t for dtype d: the address of kernelTags[d].
int kernelTags[kernels::kNumKernelDtypes];

hipError_t setDevice(int) { return hipSuccess; }
hipError_t deviceGet(hipDevice_t* device, int ordinal) {
  *device = ordinal;
  return hipSuccess;
}
hipError_t deviceGetName(char* name, int length, hipDevice_t) {
  std::strncpy(name, "Fake Instinct MI250X", static_cast<size_t>(length));
  return hipSuccess;
}
hipError_t deviceTotalMem(size_t* bytes, hipDevice_t) {
  *bytes = size_t{64} << 30;
  return hipSuccess;
}
hipError_t deviceGetPCIBusId(char* busId, int length, int) {
  std::strncpy(busId, "0000:C1:00.0", static_cast<size_t>(length));
  return hipSuccess;
}
hipError_t deviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int) {
  *value = attribute == hipDeviceAttributeMultiprocessorCount ? g_state->multiprocessors : 0;
  return hipSuccess;
}
hipError_t memGetInfo(size_t* freeBytes, size_t* total) {
  *freeBytes = g_state->freeBytes;
  *total = size_t{64} << 30;
  return hipSuccess;
}
// The names of the errors the fakes return, so that a daemon's log names them as with the runtime.
const char* errorName(hipError_t error) {
  switch (error) {
    case hipErrorNoBinaryForGpu:
      return "hipErrorNoBinaryForGpu";
    case hipErrorLaunchFailure:
      return "hipErrorLaunchFailure";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorInvalidHandle:
      return "hipErrorInvalidHandle";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorInvalidImage:
      return "hipErrorInvalidImage";
    case hipErrorOutOfMemory:
      return "hipErrorOutOfMemory";
    case hipErrorNotInitialized:
      return "hipErrorNotInitialized";
    case hipErrorNotFound:
      return "hipErrorNotFound";
    default:
      return "hipErrorUnknown";
  }
}

// A handle of another process's hipMalloc memory names its memfd: mapped here through /proc.
hipError_t ipcOpen(void** ptr, hipIpcMemHandle_t handle, unsigned flags) {
  g_state->ipcOpenFlags.push_back(flags);
  const fake_hip::IpcHandle named = fake_hip::readIpcHandle(handle.reserved);
  if (named.magic != fake_hip::kIpcMagic) {
    *ptr = g_state->ipcPointer;
    return hipSuccess;
  }
  if (named.bytes == 0) return hipErrorInvalidValue;
  const std::string path = "/proc/" + std::to_string(named.pid) + "/fd/" + std::to_string(named.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return hipErrorInvalidHandle;
  void* at = ::mmap(nullptr, named.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (at == MAP_FAILED) return hipErrorOutOfMemory;
  g_state->ipcMapped[at] = named.bytes;
  *ptr = at;
  return hipSuccess;
}
hipError_t ipcClose(void* ptr) {
  g_state->ipcClosed.push_back(ptr);
  auto mapped = g_state->ipcMapped.find(ptr);
  if (mapped != g_state->ipcMapped.end()) {
    ::munmap(ptr, mapped->second);
    g_state->ipcMapped.erase(mapped);
  }
  return hipSuccess;
}
hipError_t addressRange(hipDeviceptr_t* base, size_t* bytes, hipDeviceptr_t ptr) {
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  for (const auto& [start, size] : g_state->ipcMapped) {
    const auto begin = reinterpret_cast<uintptr_t>(start);
    if (at >= begin && at - begin < size) {
      *base = start;
      *bytes = size;
      return hipSuccess;
    }
  }
  *base = g_state->rangeBase;
  *bytes = g_state->rangeBytes;
  return hipSuccess;
}
// An imported VMM allocation: the address of one of these is its handle.
struct VmmAllocation {
  int fd;  // our own duplicate
  size_t bytes;
};

hipError_t memImport(hipMemGenericAllocationHandle_t* handle, void* osHandle,
                     hipMemAllocationHandleType type) {
  const int fd = static_cast<int>(reinterpret_cast<uintptr_t>(osHandle));
  struct stat st {};
  if (type != hipMemHandleTypePosixFileDescriptor || ::fstat(fd, &st) != 0) {
    return hipErrorInvalidValue;
  }
  *handle = reinterpret_cast<hipMemGenericAllocationHandle_t>(
      new VmmAllocation{::dup(fd), static_cast<size_t>(st.st_size)});
  ++g_state->vmmHandles;
  return hipSuccess;
}
hipError_t memRelease(hipMemGenericAllocationHandle_t handle) {
  auto* allocation = reinterpret_cast<VmmAllocation*>(handle);
  ::close(allocation->fd);  // a mapping of it stays valid, as the runtime's does
  delete allocation;
  --g_state->vmmHandles;
  return hipSuccess;
}
hipError_t addressReserve(void** ptr, size_t size, size_t, void*, unsigned long long) {
  void* at = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return hipErrorOutOfMemory;
  *ptr = at;
  ++g_state->reservations;
  return hipSuccess;
}
hipError_t addressFree(void* ptr, size_t size) {
  ::munmap(ptr, size);
  --g_state->reservations;
  return hipSuccess;
}
// Mapped without access: hipMemSetAccess grants it, as on a GPU.
hipError_t memMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                  unsigned long long flags) {
  const auto* allocation = reinterpret_cast<VmmAllocation*>(handle);
  if (flags != 0 || offset + size > allocation->bytes) return hipErrorInvalidValue;
  void* at = ::mmap(ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, allocation->fd,
                    static_cast<off_t>(offset));
  if (at == MAP_FAILED) return hipErrorOutOfMemory;
  ++g_state->mappings;
  return hipSuccess;
}
hipError_t memUnmap(void* ptr, size_t size) {
  void* at = ::mmap(ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (at == MAP_FAILED) return hipErrorInvalidValue;
  --g_state->mappings;
  return hipSuccess;
}
hipError_t memSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
  if (count != 1 || desc->location.type != hipMemLocationTypeDevice ||
      desc->flags != hipMemAccessFlagsProtReadWrite) {
    return hipErrorInvalidValue;
  }
  g_state->accessDevices.push_back(desc->location.id);
  return ::mprotect(ptr, size, PROT_READ | PROT_WRITE) == 0 ? hipSuccess : hipErrorInvalidValue;
}

hipError_t hostMalloc(void** ptr, size_t bytes, unsigned) {
  *ptr = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *ptr != nullptr ? hipSuccess : hipErrorOutOfMemory;
}
hipError_t hostFree(void* ptr) {
  std::free(ptr);
  return hipSuccess;
}

// Device memory is host memory here, as the fake's copies and kernels run on the host.
hipError_t deviceMalloc(void** ptr, size_t bytes) { return hostMalloc(ptr, bytes, 0); }
hipError_t deviceFree(void* ptr) { return hostFree(ptr); }

hipError_t streamCreate(hipStream_t* stream, unsigned flags) {
  g_state->streamFlags.push_back(flags);
  *stream = newHandle<hipStream_t>();
  return hipSuccess;
}
hipError_t streamDestroy(hipStream_t stream) {
  deleteHandle(stream);
  return hipSuccess;
}
hipError_t streamSynchronize(hipStream_t) { return g_state->streamSyncResult; }
hipError_t memcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind, hipStream_t) {
  std::memcpy(dst, src, bytes);
  ++g_state->copies;
  return hipSuccess;
}
hipError_t eventCreate(hipEvent_t* event, unsigned flags) {
  g_state->eventFlags.push_back(flags);
  ++g_state->eventsCreated;
  *event = newHandle<hipEvent_t>();
  return hipSuccess;
}
hipError_t eventRecord(hipEvent_t, hipStream_t) { return hipSuccess; }
hipError_t eventQuery(hipEvent_t) { return g_state->eventQueryResult; }
hipError_t eventDestroy(hipEvent_t event) {
  deleteHandle(event);
  return hipSuccess;
}

hipError_t moduleLoadData(hipModule_t* module, const void*) {
  if (g_state->moduleLoadResult != hipSuccess) return g_state->moduleLoadResult;
  g_state->freeBytes -= g_state->moduleBytes;
  *module = newHandle<hipModule_t>();
  return hipSuccess;
}
hipError_t moduleUnload(hipModule_t module) {
  ++g_state->modulesUnloaded;
  deleteHandle(module);
  return hipSuccess;
}
hipError_t moduleGetFunction(hipFunction_t* function, hipModule_t, const char* name) {
  g_state->functionsLookedUp.emplace_back(name);
  for (uint32_t d = 0; d < kernels::kNumKernelDtypes; ++d) {
    if (std::strcmp(name, kernels::kReduceKernelNames[d]) == 0) {
      *function = reinterpret_cast<hipFunction_t>(&kernelTags[d]);
      return hipSuccess;
    }
  }
  return hipErrorNotFound;
}
// Runs the kernel at once, as one thread covering every element.
hipError_t moduleLaunchKernel(hipFunction_t function, unsigned gridX, unsigned, unsigned,
                              unsigned blockX, unsigned, unsigned, unsigned, hipStream_t,
                              void** params, void**) {
  const auto& args = *static_cast<const kernels::ReduceArgs*>(params[0]);
  g_state->launches.push_back(args);
  g_state->launchBlocks.push_back(gridX);
  g_state->launchThreads.push_back(blockX);
  auto dtype = static_cast<uint32_t>(reinterpret_cast<int*>(function) - kernelTags);
  if (dtype >= kernels::kNumKernelDtypes) return hipErrorInvalidDeviceFunction;
  kernels::reduceStridedByDtype(dtype, args, 0, 1);
  return hipSuccess;
}

}  // namespace

FakeHipRuntime::FakeHipRuntime(int abiMajor)
    : state_(std::make_unique<FakeHipState>()), api_(std::make_shared<HipApi>()) {
  g_state = state_.get();
  HipApi& api = *api_;
  api.hipGetErrorName = errorName;
  api.hipGetErrorString = errorName;
  api.hipSetDevice = setDevice;
  api.hipDeviceGet = deviceGet;
  api.hipDeviceGetAttribute = deviceGetAttribute;
  api.hipDeviceGetName = deviceGetName;
  api.hipDeviceTotalMem = deviceTotalMem;
  api.hipDeviceGetPCIBusId = deviceGetPCIBusId;
  api.hipMemGetInfo = memGetInfo;
  api.hipIpcOpenMemHandle = ipcOpen;
  api.hipIpcCloseMemHandle = ipcClose;
  api.hipMemGetAddressRange = addressRange;
  api.hipHostMalloc = hostMalloc;
  api.hipHostFree = hostFree;
  api.hipMalloc = deviceMalloc;
  api.hipFree = deviceFree;
  api.hipStreamCreateWithFlags = streamCreate;
  api.hipStreamDestroy = streamDestroy;
  api.hipStreamSynchronize = streamSynchronize;
  api.hipMemcpyAsync = memcpyAsync;
  api.hipEventCreateWithFlags = eventCreate;
  api.hipEventRecord = eventRecord;
  api.hipEventQuery = eventQuery;
  api.hipEventDestroy = eventDestroy;
  api.hipModuleLoadData = moduleLoadData;
  api.hipModuleUnload = moduleUnload;
  api.hipModuleGetFunction = moduleGetFunction;
  api.hipModuleLaunchKernel = moduleLaunchKernel;
  api.hipMemImportFromShareableHandle = memImport;
  api.hipMemAddressReserve = addressReserve;
  api.hipMemAddressFree = addressFree;
  api.hipMemMap = memMap;
  api.hipMemUnmap = memUnmap;
  api.hipMemSetAccess = memSetAccess;
  api.hipMemRelease = memRelease;
  api.libraryName = "fake";
  api.abiMajor = abiMajor;
}

FakeHipRuntime::~FakeHipRuntime() { g_state = nullptr; }

void FakeHipRuntime::removeVmm() {
  api_->hipMemImportFromShareableHandle = nullptr;
  api_->hipMemAddressReserve = nullptr;
  api_->hipMemAddressFree = nullptr;
  api_->hipMemMap = nullptr;
  api_->hipMemUnmap = nullptr;
  api_->hipMemSetAccess = nullptr;
  api_->hipMemRelease = nullptr;
}

}  // namespace hc::device::testing
