// The CUDA runtime of the calling process, seen through DeviceRuntime. Found only when the process
// already loaded libcuda.so.1 (a CUDA build of PyTorch has, before it calls us): the client never
// brings a GPU driver into a process on its own, so dlopen runs with RTLD_NOLOAD.
//
// Everything goes through the driver API, which every CUDA process has (libcudart is linked
// statically into many frameworks and cannot be found by name). Its C ABI is declared below
// instead of included: the client always builds, without the CUDA toolkit. Entry points come
// from cuGetProcAddress_v2 at the CUDA version whose signature is declared here (drivers since
// 12.0), else from dlsym of the versioned names.
//
// Exports: cudaMalloc-style allocations as legacy IPC handles (cuIpcGetMemHandle); VMM
// allocations (cuMemCreate + cuMemMap, PyTorch's expandable segments), which the driver refuses
// to export that way, as a POSIX fd (cuMemExportToShareableHandle), which needs the allocation to
// have been created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR requested. The VMM calls are
// optional (drivers before 11.0 lack cuMemRetainAllocationHandle): without them every allocation
// is exported the legacy way. Devices are named to the daemon by PCI address as well as ordinal.
//
// Limits: ownsStream() claims every non-null stream, so a process that loaded both CUDA and HIP
// must not pass HIP streams to a CUDA-first runtime list. For VMM memory, cuMemGetAddressRange
// reports the mapping of one cuMemCreate allocation, so a buffer that spans two allocations
// mapped side by side (a large tensor in an expandable-segments pool) overruns the registered
// range and is refused rather than half mapped.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/src/device_runtime.h"
#include "client/src/gpu_runtime_util.h"
#include "common/ipc/protocol.h"

namespace hc::client {
namespace {

// ---- The CUDA driver's C ABI, as cuda.h declares it -------------------------------------------
using CuResult = int;                    // CUresult (an int-sized enum)
using CuDevicePtr = unsigned long long;  // CUdeviceptr
using CuStream = void*;                  // CUstream
using CuContext = void*;                 // CUcontext
using CuDevice = int;                    // CUdevice
using CuHostFn = void (*)(void*);        // CUhostFn
using CuMemHandle = unsigned long long;  // CUmemGenericAllocationHandle
struct CuIpcMemHandle {                  // CUipcMemHandle
  char reserved[64];
};
struct CuMemAllocationProp {  // CUmemAllocationProp, unchanged since CUDA 10.2
  int type;                   // CUmemAllocationType
  int requestedHandleTypes;   // CUmemAllocationHandleType bits
  int locationType;           // CUmemLocation
  int locationId;
  void* win32HandleMetaData;
  unsigned char allocFlags[8];
};
constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorInvalidContext = 201;
constexpr CuResult kCudaErrorHostMemoryAlreadyRegistered = 712;
constexpr int kPointerAttributeMemoryType = 2;       // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerAttributeBufferId = 7;         // CU_POINTER_ATTRIBUTE_BUFFER_ID
constexpr int kPointerAttributeIsManaged = 8;        // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kPointerAttributeDeviceOrdinal = 9;    // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kDeviceAttributePciBusId = 33;         // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
constexpr int kDeviceAttributePciDeviceId = 34;      // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
constexpr int kDeviceAttributePciDomainId = 50;      // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
constexpr int kMemHandleTypePosixFd = 0x1;           // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr unsigned kMemoryTypeDevice = 2;            // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemHostRegisterPortable = 0x1;   // CU_MEMHOSTREGISTER_PORTABLE
constexpr unsigned kMemHostRegisterDeviceMap = 0x2;  // CU_MEMHOSTREGISTER_DEVICEMAP
constexpr unsigned kStreamWaitValueGeq = 0x0;        // CU_STREAM_WAIT_VALUE_GEQ
constexpr int kStreamCaptureStatusNone = 0;          // CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kStreamCaptureStatusActive = 1;        // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr CuResult kCudaErrorStreamCaptureImplicit = 906;  // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
constexpr uint64_t kGetProcAddressDefault = 0;       // CU_GET_PROC_ADDRESS_DEFAULT
constexpr int kGetProcAddressSuccess = 0;            // CU_GET_PROC_ADDRESS_SUCCESS

static_assert(sizeof(CuIpcMemHandle) == sizeof(ExportedAllocation::handle));
static_assert(sizeof(CuDevicePtr) == 8);
static_assert(sizeof(CuMemAllocationProp) == 32);

using GetProcAddressFn = CuResult (*)(const char*, void**, int, uint64_t, int*);

class CudaRuntime final : public DeviceRuntime {
 public:
  // Null when no libcuda.so.1 is loaded in this process, or it lacks a call we need.
  static CudaRuntime* createIfLoaded();

  const char* name() const override { return "cuda"; }
  bool lookup(const void* ptr, DevicePointer* out) override;
  Result<ExportedAllocation> exportAllocation(const DevicePointer& p) override;
  bool ownsStream(void* stream) override;
  Status launchHostFunc(void* stream, HostFn fn, void* arg) override;
  Status waitValue32(void* stream, std::atomic<uint32_t>* word, uint32_t value) override;
  Status registerHostMemory(void* ptr, size_t bytes) override;
  Status synchronize(void* stream) override;
  Status checkNotCapturing(void* stream) override;
  Result<void*> allocateDevice(size_t bytes) override;
  Status freeDevice(void* ptr) override;
  Status copyToHostAsync(void* stream, void* dst, const void* src, size_t bytes) override;

 private:
  // A host range registered with registerHostMemory() and where the device sees it.
  struct MappedRange {
    uintptr_t host;
    size_t bytes;
    CuDevicePtr device;
  };

  // Makes a context current for the scope when the calling thread has none (a thread the
  // framework never used for CUDA): the primary context of `device`, or with kAnyDevice of the
  // first device that has one, but only a primary context the framework already created, never
  // a new one (a context costs hundreds of MiB of GPU memory). A thread with a context keeps it.
  static constexpr CuDevice kAnyDevice = -1;
  class ContextForCall {
   public:
    ContextForCall(const CudaRuntime& rt, CuDevice device);
    ~ContextForCall();
    ContextForCall(const ContextForCall&) = delete;
    ContextForCall& operator=(const ContextForCall&) = delete;

   private:
    const CudaRuntime& rt_;
    CuDevice device_;
    bool pushed_ = false;
  };
  // For stream 0, the legacy default stream of the current context: a context for the scope, as
  // ContextForCall(kAnyDevice) gives (a caller's thread normally has one already). Nothing for
  // any other stream, which names its own context.
  class LegacyStreamContext {
   public:
    LegacyStreamContext(const CudaRuntime& rt, void* stream) {
      if (stream == nullptr) context_.emplace(rt, kAnyDevice);
    }

   private:
    std::optional<ContextForCall> context_;
  };

  bool resolveAll(void* library);
  bool resolveOptional(void* library);
  bool resolveVmm(void* library);
  template <typename Fn>
  bool resolve(void* library, const char* name, int version, const char* symbol, Fn* slot,
               const char* olderSymbol = nullptr);
  Status failure(const char* call, CuResult result) const;
  // The same, naming the allocation the call was about.
  Status failure(const char* call, CuResult result, const DevicePointer& p) const;
  // The PCI address of `device`; nullopt when the driver cannot say.
  std::optional<uint32_t> pciAddress(CuDevice device);
  // The POSIX fd of the VMM allocation `handle` (retained by the caller) that maps at p.base.
  // Runs with the allocation's context current.
  Result<ExportedAllocation> exportVmm(const DevicePointer& p, CuMemHandle handle);

  GetProcAddressFn getProcAddress_ = nullptr;
  CuResult (*getErrorName_)(CuResult, const char**) = nullptr;
  CuResult (*pointerGetAttribute_)(void*, int, CuDevicePtr) = nullptr;
  CuResult (*memGetAddressRange_)(CuDevicePtr*, size_t*, CuDevicePtr) = nullptr;
  CuResult (*ipcGetMemHandle_)(CuIpcMemHandle*, CuDevicePtr) = nullptr;
  CuResult (*launchHostFunc_)(CuStream, CuHostFn, void*) = nullptr;
  CuResult (*streamWaitValue32_)(CuStream, CuDevicePtr, uint32_t, unsigned) = nullptr;
  CuResult (*memHostGetDevicePointer_)(CuDevicePtr*, void*, unsigned) = nullptr;
  CuResult (*memHostRegister_)(void*, size_t, unsigned) = nullptr;
  CuResult (*streamSynchronize_)(CuStream) = nullptr;
  // Optional (drivers since 10.0 have it): without it no stream is taken to be capturing.
  CuResult (*streamIsCapturing_)(CuStream, int*) = nullptr;
  // Optional: without them allocateDevice refuses.
  CuResult (*memAlloc_)(CuDevicePtr*, size_t) = nullptr;
  CuResult (*memFree_)(CuDevicePtr) = nullptr;
  // Optional: without it device-resident scalars are refused.
  CuResult (*memcpyDtoHAsync_)(void*, CuDevicePtr, size_t, CuStream) = nullptr;
  CuResult (*ctxGetCurrent_)(CuContext*) = nullptr;
  CuResult (*deviceGetCount_)(int*) = nullptr;
  CuResult (*devicePrimaryCtxGetState_)(CuDevice, unsigned*, int*) = nullptr;
  CuResult (*devicePrimaryCtxRetain_)(CuContext*, CuDevice) = nullptr;
  CuResult (*devicePrimaryCtxRelease_)(CuDevice) = nullptr;
  CuResult (*ctxPushCurrent_)(CuContext) = nullptr;
  CuResult (*ctxPopCurrent_)(CuContext*) = nullptr;
  CuResult (*deviceGetAttribute_)(int*, int, CuDevice) = nullptr;
  // VMM exports; all four or none (hasVmm_).
  CuResult (*memRetainAllocationHandle_)(CuMemHandle*, void*) = nullptr;
  CuResult (*memGetAllocationPropertiesFromHandle_)(CuMemAllocationProp*, CuMemHandle) = nullptr;
  CuResult (*memExportToShareableHandle_)(void*, CuMemHandle, int, unsigned long long) = nullptr;
  CuResult (*memRelease_)(CuMemHandle) = nullptr;
  bool hasVmm_ = false;

  std::mutex mutex_;
  std::vector<MappedRange> mapped_;  // guarded by mutex_
  PciAddresses pciAddresses_;
};

// Prefers cuGetProcAddress_v2 at `version` (the CUDA version that introduced the signature
// declared above), then dlsym of `symbol`, then of `olderSymbol` (same signature, older name).
template <typename Fn>
bool CudaRuntime::resolve(void* library, const char* name, int version, const char* symbol,
                          Fn* slot, const char* olderSymbol) {
  void* fn = nullptr;
  int found = -1;
  if (getProcAddress_ != nullptr &&
      getProcAddress_(name, &fn, version, kGetProcAddressDefault, &found) == kCudaSuccess &&
      found == kGetProcAddressSuccess && fn != nullptr) {
    *slot = reinterpret_cast<Fn>(fn);
    return true;
  }
  fn = ::dlsym(library, symbol);
  if (fn == nullptr && olderSymbol != nullptr) fn = ::dlsym(library, olderSymbol);
  *slot = reinterpret_cast<Fn>(fn);
  return fn != nullptr;
}

bool CudaRuntime::resolveAll(void* library) {
  getProcAddress_ = reinterpret_cast<GetProcAddressFn>(::dlsym(library, "cuGetProcAddress_v2"));
  return resolve(library, "cuGetErrorName", 6000, "cuGetErrorName", &getErrorName_) &&
         resolve(library, "cuPointerGetAttribute", 4000, "cuPointerGetAttribute",
                 &pointerGetAttribute_) &&
         resolve(library, "cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2",
                 &memGetAddressRange_) &&
         resolve(library, "cuIpcGetMemHandle", 4010, "cuIpcGetMemHandle", &ipcGetMemHandle_) &&
         resolve(library, "cuLaunchHostFunc", 10000, "cuLaunchHostFunc", &launchHostFunc_) &&
         resolve(library, "cuStreamWaitValue32", 12000, "cuStreamWaitValue32_v2",
                 &streamWaitValue32_, "cuStreamWaitValue32") &&
         resolve(library, "cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2",
                 &memHostGetDevicePointer_) &&
         resolve(library, "cuMemHostRegister", 6050, "cuMemHostRegister_v2", &memHostRegister_) &&
         resolve(library, "cuStreamSynchronize", 2000, "cuStreamSynchronize",
                 &streamSynchronize_) &&
         resolve(library, "cuCtxGetCurrent", 4000, "cuCtxGetCurrent", &ctxGetCurrent_) &&
         resolve(library, "cuDeviceGetCount", 2000, "cuDeviceGetCount", &deviceGetCount_) &&
         resolve(library, "cuDevicePrimaryCtxGetState", 7000, "cuDevicePrimaryCtxGetState",
                 &devicePrimaryCtxGetState_) &&
         resolve(library, "cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain",
                 &devicePrimaryCtxRetain_) &&
         resolve(library, "cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2",
                 &devicePrimaryCtxRelease_) &&
         resolve(library, "cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2", &ctxPushCurrent_) &&
         resolve(library, "cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2", &ctxPopCurrent_) &&
         resolve(library, "cuDeviceGetAttribute", 2000, "cuDeviceGetAttribute",
                 &deviceGetAttribute_) &&
         resolveOptional(library) && resolveVmm(library);
}

// Optional calls: always true; a missing one leaves its slot null.
bool CudaRuntime::resolveOptional(void* library) {
  (void)resolve(library, "cuStreamIsCapturing", 10000, "cuStreamIsCapturing",
                &streamIsCapturing_);
  if (!resolve(library, "cuMemAlloc", 3020, "cuMemAlloc_v2", &memAlloc_) ||
      !resolve(library, "cuMemFree", 3020, "cuMemFree_v2", &memFree_)) {
    memAlloc_ = nullptr;
    memFree_ = nullptr;
  }
  (void)resolve(library, "cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2", &memcpyDtoHAsync_);
  return true;
}

// Optional: always true. hasVmm_ says whether VMM allocations can be exported.
bool CudaRuntime::resolveVmm(void* library) {
  hasVmm_ =
      resolve(library, "cuMemRetainAllocationHandle", 11000, "cuMemRetainAllocationHandle",
              &memRetainAllocationHandle_) &&
      resolve(library, "cuMemGetAllocationPropertiesFromHandle", 10020,
              "cuMemGetAllocationPropertiesFromHandle", &memGetAllocationPropertiesFromHandle_) &&
      resolve(library, "cuMemExportToShareableHandle", 10020, "cuMemExportToShareableHandle",
              &memExportToShareableHandle_) &&
      resolve(library, "cuMemRelease", 10020, "cuMemRelease", &memRelease_);
  return true;
}

CudaRuntime* CudaRuntime::createIfLoaded() {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (library == nullptr) return nullptr;
  // Never closed: the driver belongs to the process, which loaded it before us.
  auto* runtime = new CudaRuntime();
  if (!runtime->resolveAll(library)) {
    delete runtime;
    return nullptr;
  }
  return runtime;
}

Status CudaRuntime::failure(const char* call, CuResult result) const {
  const char* name = nullptr;
  if (getErrorName_(result, &name) != kCudaSuccess || name == nullptr) name = "CUresult";
  return Status(Code::DeviceError,
                std::string(call) + " failed: " + name + " [" + std::to_string(result) + "]");
}

Status CudaRuntime::failure(const char* call, CuResult result, const DevicePointer& p) const {
  return aboutAllocation(failure(call, result), "CUDA", p);
}

std::optional<uint32_t> CudaRuntime::pciAddress(CuDevice device) {
  return pciAddresses_.get(device, [this](CuDevice d, int* domain, int* bus, int* slot) {
    return deviceGetAttribute_(domain, kDeviceAttributePciDomainId, d) == kCudaSuccess &&
           deviceGetAttribute_(bus, kDeviceAttributePciBusId, d) == kCudaSuccess &&
           deviceGetAttribute_(slot, kDeviceAttributePciDeviceId, d) == kCudaSuccess;
  });
}

CudaRuntime::ContextForCall::ContextForCall(const CudaRuntime& rt, CuDevice device)
    : rt_(rt), device_(device) {
  CuContext current = nullptr;
  if (rt_.ctxGetCurrent_(&current) == kCudaSuccess && current != nullptr) return;
  auto active = [&](CuDevice d) {
    unsigned flags = 0;
    int isActive = 0;
    return rt_.devicePrimaryCtxGetState_(d, &flags, &isActive) == kCudaSuccess && isActive != 0;
  };
  if (device_ == kAnyDevice) {
    int count = 0;
    if (rt_.deviceGetCount_(&count) != kCudaSuccess) return;
    for (CuDevice d = 0; d < count && device_ == kAnyDevice; ++d) {
      if (active(d)) device_ = d;
    }
    if (device_ == kAnyDevice) return;
  } else if (!active(device_)) {
    return;
  }
  CuContext primary = nullptr;
  if (rt_.devicePrimaryCtxRetain_(&primary, device_) != kCudaSuccess) return;
  if (rt_.ctxPushCurrent_(primary) == kCudaSuccess) {
    pushed_ = true;
  } else {
    (void)rt_.devicePrimaryCtxRelease_(device_);
  }
}

CudaRuntime::ContextForCall::~ContextForCall() {
  if (!pushed_) return;
  CuContext popped = nullptr;
  (void)rt_.ctxPopCurrent_(&popped);
  (void)rt_.devicePrimaryCtxRelease_(device_);
}

bool CudaRuntime::lookup(const void* ptr, DevicePointer* out) {
  if (ptr == nullptr) return false;
  const auto address = static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(ptr));
  // Addresses are unique across the process (unified addressing), so any context answers.
  ContextForCall context(*this, kAnyDevice);
  unsigned memoryType = 0;
  if (pointerGetAttribute_(&memoryType, kPointerAttributeMemoryType, address) != kCudaSuccess ||
      memoryType != kMemoryTypeDevice) {
    return false;  // host, host-registered, or not CUDA's at all
  }
  unsigned managed = 0;  // the driver writes a bool-sized value; the rest stays zero
  if (pointerGetAttribute_(&managed, kPointerAttributeIsManaged, address) == kCudaSuccess &&
      managed != 0) {
    return false;  // managed memory is staged as host memory
  }
  int device = 0;
  unsigned long long bufferId = 0;
  CuDevicePtr base = 0;
  size_t bytes = 0;
  if (pointerGetAttribute_(&device, kPointerAttributeDeviceOrdinal, address) != kCudaSuccess ||
      pointerGetAttribute_(&bufferId, kPointerAttributeBufferId, address) != kCudaSuccess ||
      memGetAddressRange_(&base, &bytes, address) != kCudaSuccess) {
    return false;
  }
  DevicePointer p;
  p.memoryType = static_cast<uint8_t>(ipc::DeviceMemory::Cuda);
  p.vendor = static_cast<uint8_t>(ipc::DeviceVendor::Nvidia);
  p.device = device;
  // The driver's buffer id is unique within the process and never reused, so an allocation freed
  // and replaced at the same address gets a new id and a new mapping in the daemon.
  p.allocationId = bufferId;
  p.base = static_cast<uintptr_t>(base);
  p.bytes = bytes;
  if (std::optional<uint32_t> address = pciAddress(device)) {
    p.hasPciAddress = true;
    p.pciAddress = *address;
  }
  *out = p;
  return true;
}

Result<ExportedAllocation> CudaRuntime::exportAllocation(const DevicePointer& p) {
  ContextForCall context(*this, p.device);
  CuMemHandle vmm = 0;
  // Succeeds only for memory mapped with cuMemMap: a VMM allocation, which cuIpcGetMemHandle
  // refuses. Any other answer means ordinary memory, exported the legacy way below.
  if (hasVmm_ &&
      memRetainAllocationHandle_(&vmm, reinterpret_cast<void*>(p.base)) == kCudaSuccess) {
    Result<ExportedAllocation> exported = exportVmm(p, vmm);
    // Drops the reference the retain took, not the allocation: its owner's mapping holds that.
    const CuResult released = memRelease_(vmm);
    if (released != kCudaSuccess) {
      if (exported.isOk()) ::close(exported->fd);
      return failure("cuMemRelease (of the retained handle)", released, p);
    }
    return exported;
  }
  CuIpcMemHandle handle{};
  const CuResult result = ipcGetMemHandle_(&handle, static_cast<CuDevicePtr>(p.base));
  if (result != kCudaSuccess) return failure("cuIpcGetMemHandle", result, p);
  ExportedAllocation exported;
  exported.handleKind = static_cast<uint32_t>(ipc::HandleKind::LegacyIpc);
  std::memcpy(exported.handle, &handle, sizeof(handle));
  exported.fd = -1;
  return exported;
}

Result<ExportedAllocation> CudaRuntime::exportVmm(const DevicePointer& p, CuMemHandle handle) {
  CuMemAllocationProp prop{};
  CuResult result = memGetAllocationPropertiesFromHandle_(&prop, handle);
  if (result != kCudaSuccess) {
    return failure("cuMemGetAllocationPropertiesFromHandle", result, p);
  }
  // A VMM allocation exports only as a handle type its creator asked for; the driver's own error
  // for this case does not say so.
  if ((prop.requestedHandleTypes & kMemHandleTypePosixFd) == 0) {
    const std::string has = std::to_string(prop.requestedHandleTypes);
    return invalidArgument(describeAllocation("CUDA", p) +
                           " is VMM memory (cuMemCreate) created without "
                           "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in CUmemAllocationProp::"
                           "requestedHandleTypes (it has " +
                           has +
                           "), so it cannot be shared with hetero-commd: allocate it with that "
                           "handle type");
  }
  int fd = -1;
  result = memExportToShareableHandle_(&fd, handle, kMemHandleTypePosixFd, 0);
  if (result != kCudaSuccess) return failure("cuMemExportToShareableHandle", result, p);
  ExportedAllocation exported;
  exported.handleKind = static_cast<uint32_t>(ipc::HandleKind::Fd);
  exported.fd = fd;
  return exported;
}

bool CudaRuntime::ownsStream(void* stream) {
  // The driver offers no safe test of a foreign pointer (it would dereference it), so with CUDA
  // present every non-null stream is taken to be CUDA's (CU_STREAM_LEGACY and
  // CU_STREAM_PER_THREAD, 0x1 and 0x2, included). The null stream never is.
  return stream != nullptr;
}

Status CudaRuntime::launchHostFunc(void* stream, HostFn fn, void* arg) {
  LegacyStreamContext context(*this, stream);
  const CuResult result = launchHostFunc_(stream, fn, arg);
  if (result != kCudaSuccess) return failure("cuLaunchHostFunc", result);
  return okStatus();
}

Status CudaRuntime::waitValue32(void* stream, std::atomic<uint32_t>* word, uint32_t value) {
  const auto host = reinterpret_cast<uintptr_t>(word);
  CuDevicePtr device = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const MappedRange& range : mapped_) {
      if (host >= range.host && host - range.host < range.bytes) {
        device = range.device + (host - range.host);
        break;
      }
    }
  }
  if (device == 0) {
    ContextForCall context(*this, kAnyDevice);
    CuResult result = memHostGetDevicePointer_(&device, word, 0);
    if (result != kCudaSuccess) return failure("cuMemHostGetDevicePointer", result);
  }
  // GEQ compares (int32_t)(*word - value) >= 0, so the flag may count past `value`.
  LegacyStreamContext context(*this, stream);
  const CuResult result = streamWaitValue32_(stream, device, value, kStreamWaitValueGeq);
  if (result != kCudaSuccess) return failure("cuStreamWaitValue32", result);
  return okStatus();
}

Status CudaRuntime::registerHostMemory(void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return invalidArgument("registerHostMemory of an empty range");
  ContextForCall context(*this, kAnyDevice);
  // Device-mapped: the GPU reads the flag where it lies (waitValue32). Portable: for every
  // context, so streams of every device may wait on it.
  CuResult result =
      memHostRegister_(ptr, bytes, kMemHostRegisterDeviceMap | kMemHostRegisterPortable);
  if (result != kCudaSuccess && result != kCudaErrorHostMemoryAlreadyRegistered) {
    return failure("cuMemHostRegister", result);
  }
  CuDevicePtr device = 0;
  result = memHostGetDevicePointer_(&device, ptr, 0);
  if (result != kCudaSuccess) return failure("cuMemHostGetDevicePointer", result);
  std::lock_guard<std::mutex> lock(mutex_);
  mapped_.push_back(MappedRange{reinterpret_cast<uintptr_t>(ptr), bytes, device});
  return okStatus();
}

Status CudaRuntime::synchronize(void* stream) {
  LegacyStreamContext context(*this, stream);
  const CuResult result = streamSynchronize_(stream);
  if (result == kCudaErrorInvalidContext) {
    return failure("cuStreamSynchronize (no CUDA context on this thread)", result);
  }
  if (result != kCudaSuccess) return failure("cuStreamSynchronize", result);
  return okStatus();
}

Status CudaRuntime::checkNotCapturing(void* stream) {
  if (streamIsCapturing_ == nullptr) return okStatus();
  LegacyStreamContext context(*this, stream);
  int capture = kStreamCaptureStatusNone;
  const CuResult result = streamIsCapturing_(stream, &capture);
  // The legacy stream while another stream captures in global mode: using it would invalidate
  // that capture, as NCCL's work would.
  if (result == kCudaErrorStreamCaptureImplicit) capture = kStreamCaptureStatusActive;
  else if (result != kCudaSuccess) return failure("cuStreamIsCapturing", result);
  if (capture == kStreamCaptureStatusNone) return okStatus();
  return Status{Code::Unsupported,
                "the stream is being captured into a CUDA graph; hetero-comm operations cannot "
                "be captured and replayed: issue them outside the capture"};
}

Result<void*> CudaRuntime::allocateDevice(size_t bytes) {
  if (memAlloc_ == nullptr) return DeviceRuntime::allocateDevice(bytes);
  // The caller's current context (its device), as cudaMalloc; a thread without one gets a
  // primary context the process already uses.
  ContextForCall context(*this, kAnyDevice);
  CuDevicePtr device = 0;
  const CuResult result = memAlloc_(&device, bytes);
  if (result != kCudaSuccess) return failure("cuMemAlloc", result);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(device));
}

Status CudaRuntime::freeDevice(void* ptr) {
  if (memFree_ == nullptr) return DeviceRuntime::freeDevice(ptr);
  ContextForCall context(*this, kAnyDevice);
  const CuResult result = memFree_(static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(ptr)));
  if (result != kCudaSuccess) return failure("cuMemFree", result);
  return okStatus();
}

Status CudaRuntime::copyToHostAsync(void* stream, void* dst, const void* src, size_t bytes) {
  if (memcpyDtoHAsync_ == nullptr) return DeviceRuntime::copyToHostAsync(stream, dst, src, bytes);
  LegacyStreamContext context(*this, stream);
  const CuResult result = memcpyDtoHAsync_(
      dst, static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(src)), bytes, stream);
  if (result != kCudaSuccess) return failure("cuMemcpyDtoHAsync", result);
  return okStatus();
}

}  // namespace

DeviceRuntime* cudaRuntime() {
  // Built once, on first use; lives as long as the process (the driver it wraps does too).
  static CudaRuntime* const runtime = CudaRuntime::createIfLoaded();
  return runtime;
}

}  // namespace hc::client
