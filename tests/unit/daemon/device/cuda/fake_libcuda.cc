// A stand-in for libcuda.so.1 that the CUDA backend's tests load by path: the driver entry points
// hc_device_cuda uses, implemented over host memory and checked as strictly as the tests need.
// It is not a GPU and proves nothing about one; it lets the tests drive the backend's own logic
// (entry-point resolution, context discipline, import bounds, the kernels' launch ABI, fallbacks).
//
// - Every call that needs a current context fails with CUDA_ERROR_INVALID_CONTEXT without one.
// - cuGetProcAddress_v2 answers by the CUDA version asked for, as the driver does: asking for a
//   version older than a _v2 symbol's returns the v1 symbol, which this library does not have.
// - "Device memory" is host memory. A legacy IPC handle is {fake_cuda::kIpcMagic, address, bytes},
//   then, for cuMemAlloc's memory, {pid, memfd}: another process opens it through /proc.
// - cuModuleLoadData accepts only images that start with the fatbin magic, and cuLaunchKernel
//   runs the reduction kernels' host build (reduce_math.h) thread by thread, as a grid would.
// - Streams are queues run in order by a worker thread each (fake_streams.h). The backend's
//   copies, launches and event records run at once on the calling thread, after the stream's
//   earlier work (FakeStream::runInOrder), so events are complete when recorded.
// Configured at cuInit from the environment (fake_cuda.h names the variables). The entry points
// of the client's CUDA seam live in fake_libcuda_client.cc.
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/device/kernels/reduce_math.h"
#include "tests/unit/daemon/device/cuda/fake_libcuda_state.h"

using namespace hc::device::fake_cuda::driver;  // NOLINT: the fake's own state

namespace {

constexpr size_t kGpuBytes = size_t{16} << 30;
constexpr size_t kContextBytes = size_t{300} << 20;
constexpr size_t kModuleBytes = size_t{2} << 20;

}  // namespace

extern "C" {

// Test controls (fake_cuda.h).
int hcFakeCudaLiveObjects() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int retains = 0;
  for (const Gpu& gpu : s.gpus) retains += gpu.context.retains;
  return static_cast<int>(s.ipcOpen.size() + s.vmm.size() + s.reserved.size() + s.pinned.size() +
                          s.deviceMemory.size() + s.streams.size() + s.events.size() +
                          s.modules.size()) +
         retains;
}
int hcFakeCudaOpenIpcHandles() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int>(state().ipcOpen.size());
}
int hcFakeCudaLaunches() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().launches;
}
int hcFakeCudaContextDepth() { return static_cast<int>(contextStack.size()); }
void hcFakeCudaMakeIpcHandle(const void* address, uint64_t bytes, unsigned char out[64]) {
  std::memset(out, 0, 64);
  const uint64_t magic = fake::kIpcMagic;
  const uint64_t at = reinterpret_cast<uintptr_t>(address);
  std::memcpy(out, &magic, 8);
  std::memcpy(out + 8, &at, 8);
  std::memcpy(out + 16, &bytes, 8);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  // Read here: entry points are resolved before cuInit.
  const char* failProc = std::getenv(fake::kNoProcAddressVariable);
  if (failProc != nullptr && std::string(failProc) == "1") return CUDA_ERROR_NOT_SUPPORTED;
  if (flags != CU_GET_PROC_ADDRESS_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  std::string name = symbol;
  for (const Versioned& v : kVersioned) {
    if (name == v.name && cudaVersion >= v.version) name = v.symbol;
  }
  void* found = dlsym(selfHandle(), name.c_str());
  *pfn = found;
  if (symbolStatus != nullptr) {
    *symbolStatus =
        found != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return found != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  configureFromEnvironment(s);
  const char* devices = std::getenv(fake::kDevicesVariable);
  if (devices != nullptr && *devices == '\0') {
    s.gpus.clear();
    return CUDA_ERROR_NO_DEVICE;
  }
  s.initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  *version = fake::kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_ERROR_INVALID_VALUE:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT:
      *name = "CUDA_ERROR_INVALID_CONTEXT";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE:
      *name = "CUDA_ERROR_INVALID_HANDLE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      *name = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? "the provided PTX was compiled with an "
                                                        "unsupported toolchain."
                                                      : "fake driver error";
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!state().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = static_cast<int>(state().gpus.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(state().gpus.size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  std::snprintf(name, static_cast<size_t>(length), "Fake GPU %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = kGpuBytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* busId, int length, CUdevice device) {
  std::vector<int> address = {0, 0x3A + device, 0};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (auto it = state().pciOverride.find(device); it != state().pciOverride.end()) {
      address = it->second;
    }
  }
  // Upper case, as the driver spells it.
  std::snprintf(busId, static_cast<size_t>(length), "%04X:%02X:%02X.0", address[0], address[1],
                address[2]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (device < 0 || device >= static_cast<int>(state().gpus.size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *value = state().gpus[device].computeMode;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 2;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: {
      // What cuDeviceGetPCIBusId prints, unless a test moved the device (hcFakeCudaSetPciAddress).
      std::vector<int> address = {0, 0x3A + device, 0};
      std::lock_guard<std::mutex> lock(state().mutex);
      if (auto it = state().pciOverride.find(device); it != state().pciOverride.end()) {
        address = it->second;
      }
      *value = attribute == CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID ? address[0]
               : attribute == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID  ? address[1]
                                                              : address[2];
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  std::lock_guard<std::mutex> lock(state().mutex);
  Gpu& gpu = state().gpus.at(device);
  if (gpu.computeMode != CU_COMPUTEMODE_DEFAULT) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  ++gpu.context.retains;
  *context = &gpu.context;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  std::lock_guard<std::mutex> lock(state().mutex);
  Gpu& gpu = state().gpus.at(device);
  if (gpu.context.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --gpu.context.retains;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (context == nullptr || context->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  contextStack.push_back(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  if (contextStack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context != nullptr) *context = contextStack.back();
  contextStack.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* freeBytes, size_t* totalBytes) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  size_t modules = 0;
  for (const auto& [module, ordinal] : state().modules)
    modules += ordinal == contextStack.back()->ordinal;
  *totalBytes = kGpuBytes;
  *freeBytes = kGpuBytes - kContextBytes - modules * kModuleBytes;
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
  uint64_t magic = 0, address = 0, bytes = 0;
  std::memcpy(&magic, handle.reserved, 8);
  std::memcpy(&address, handle.reserved + 8, 8);
  std::memcpy(&bytes, handle.reserved + 16, 8);
  if (magic != fake::kIpcMagic || address == 0) return CUDA_ERROR_INVALID_VALUE;
  // A handle of another process's cuMemAlloc memory names its memfd: mapped here through /proc.
  uint64_t pid = 0, fd = 0;
  std::memcpy(&pid, handle.reserved + 24, 8);
  std::memcpy(&fd, handle.reserved + 32, 8);
  bool mapped = false;
  if (pid != 0 && pid != static_cast<uint64_t>(getpid())) {
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const int opened = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (opened < 0) return CUDA_ERROR_INVALID_VALUE;
    void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opened, 0);
    ::close(opened);
    if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    address = reinterpret_cast<uintptr_t>(at);
    mapped = true;
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().ipcOpen.count(address) != 0) return CUDA_ERROR_ALREADY_MAPPED;
  state().ipcOpen[address] = bytes;
  if (mapped) state().ipcMapped.insert(address);
  *ptr = address;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr ptr) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().ipcOpen.find(ptr);
  if (it == state().ipcOpen.end()) return CUDA_ERROR_INVALID_VALUE;
  if (state().ipcMapped.erase(ptr) == 1) ::munmap(reinterpret_cast<void*>(ptr), it->second);
  state().ipcOpen.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* bytes, CUdeviceptr ptr) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  for (const auto& [start, size] : state().ipcOpen) {
    if (ptr >= start && ptr < start + size) {
      *base = start;
      *bytes = size;
      return CUDA_SUCCESS;
    }
  }
  for (const auto& [start, allocation] : state().allocations) {
    if (ptr >= start && ptr < start + allocation.bytes) {
      *base = start;
      *bytes = allocation.bytes;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType type) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  struct stat st {};
  if (fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  VmmAllocation allocation{dup(fd), static_cast<size_t>(st.st_size),
                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
  *handle = state().nextVmm++;
  state().vmm[*handle] = allocation;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  void* at = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(state().mutex);
  *ptr = reinterpret_cast<uintptr_t>(at);
  state().reserved[*ptr] = size;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().reserved.find(ptr);
  if (it == state().reserved.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  state().reserved.erase(it);
  return CUDA_SUCCESS;
}

// Mapped without access: cuMemSetAccess grants it, as on a GPU.
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().vmm.find(handle);
  if (it == state().vmm.end() || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (offset + size > it->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                  it->second.fd, static_cast<off_t>(offset));
  return at == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) == 0
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  // Back to a bare reservation.
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  return at == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().vmm.find(handle);
  if (it == state().vmm.end()) return CUDA_ERROR_INVALID_VALUE;
  close(it->second.fd);  // a mapping of it stays valid, as the driver's does
  state().vmm.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *ptr = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().pinned.insert(*ptr);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* ptr) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().pinned.erase(ptr) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(ptr);
  return CUDA_SUCCESS;
}

// Also known to the client half (cuPointerGetAttribute says device memory of the current
// context's device; cuIpcGetMemHandle exports it), as cudaMalloc memory is.
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto memory = std::make_shared<hc::device::testing::MemfdAllocation>(bytes, "hc-fake-cuda-mem");
  if (memory->view() == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = memory->view();
  const int device = contextStack.back()->ordinal;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().deviceMemory[p] = memory;
  state().allocations[reinterpret_cast<CUdeviceptr>(p)] =
      DeviceAllocation{bytes, device, state().nextBufferId++, false, nullptr, 0, memory};
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  void* p = reinterpret_cast<void*>(ptr);
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().deviceMemory.erase(p) == 0) return CUDA_ERROR_INVALID_VALUE;
  state().allocations.erase(ptr);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  *stream = new CUstream_st;
  (*stream)->queue = std::make_unique<hc::device::testing::FakeStream>(
      "stream" + std::to_string(++state().streamsMade), streamLog());
  state().streams.insert(*stream);
  return CUDA_SUCCESS;
}

// Returns once the stream's queued work has run, as its resources outlive it on the driver too.
CUresult cuStreamDestroy_v2(CUstream stream) {
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().streams.erase(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  delete stream;  // outside the lock: it waits for the worker
  return CUDA_SUCCESS;
}

// Also the NULL stream (the client's group path synchronizes it), which needs a context.
CUresult cuStreamSynchronize(CUstream stream) {
  CUresult error = CUDA_SUCCESS;
  hc::device::testing::FakeStream* queue = queueOf(stream, &error);
  if (queue == nullptr) return error;
  queue->synchronize();
  return CUDA_SUCCESS;
}

// The daemon's copies run at once on the calling thread, after the stream's earlier work.
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  stream->queue->runInOrder([&] {
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  *event = new CUevent_st;
  state().events.insert(*event);
  return CUDA_SUCCESS;
}

// Events complete when recorded: the record waits for the stream's earlier work, so that
// cuEventQuery never reports work done that has not run.
CUresult cuEventRecord(CUevent event, CUstream stream) {
  if (!knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().events.count(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  stream->queue->runInOrder([] {});
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().events.count(event) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventDestroy_v2(CUevent event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (state().moduleLoadFails) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof(magic));
  if (magic != fake::kFatbinMagic) return CUDA_ERROR_INVALID_IMAGE;
  std::lock_guard<std::mutex> lock(state().mutex);
  *module = new CUmod_st;
  state().modules[*module] = contextStack.back()->ordinal;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().modules.erase(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete module;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().modules.count(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (uint32_t dtype = 0; dtype < k::kNumKernelDtypes; ++dtype) {
    if (std::strcmp(name, k::kReduceKernelNames[dtype]) == 0) {
      state().functions[dtype].dtype = dtype;
      *function = &state().functions[dtype];
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

// Runs the kernel's host build over the grid, one thread index at a time.
CUresult cuLaunchKernel(CUfunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                        unsigned int blockX, unsigned int blockY, unsigned int blockZ,
                        unsigned int sharedBytes, CUstream stream, void** params, void** extra) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (f == nullptr || params == nullptr || extra != nullptr || sharedBytes != 0 || gridY != 1 ||
      gridZ != 1 || blockY != 1 || blockZ != 1 || gridX == 0 || blockX == 0 || blockX > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto* args = static_cast<const k::ReduceArgs*>(params[0]);
  const uint64_t threads = uint64_t{gridX} * blockX;
  // At once on the calling thread, after the stream's earlier work, as the copies run.
  stream->queue->runInOrder([&] {
    for (uint64_t thread = 0; thread < threads; ++thread) {
      k::reduceStridedByDtype(f->dtype, *args, thread, threads);
    }
  });
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().launches;
  return CUDA_SUCCESS;
}

}  // extern "C"
