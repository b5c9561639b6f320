// The HIP runtime of the calling process, seen through DeviceRuntime. Found only when the process
// already loaded libamdhip64 (a ROCm build of PyTorch has, before it calls us): the client never
// brings a GPU runtime into a process on its own, so dlopen runs with RTLD_NOLOAD.
//
// HIP's C ABI is declared below instead of included: the client compiles without HIP headers.
// Every call used has the same C signature in HIP 5.x and 6.x. Two things 6.0 changed are handled
// here: hipMemoryType was renumbered (the device value is 1 in 5.x, 2 in 6.x), so the value to
// compare with follows the runtime's major version; and hipPointerAttribute_t renamed its first
// field (same layout, so the struct below fits both).
//
// Exports: hipMalloc allocations as legacy IPC handles; VMM allocations (hipMemCreate +
// hipMemMap), which legacy IPC cannot export, as a POSIX fd (hipMemExportToShareableHandle), which
// needs the allocation to have been created with hipMemHandleTypePosixFileDescriptor requested.
// The VMM calls (HIP 5.1+) are optional. The allocation's properties are not read to explain a
// refused export: hipMemAllocationProp changed layout in 6.0. As with CUDA, a VMM buffer must lie
// within one hipMemCreate allocation. Devices are named to the daemon by PCI address as well.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/src/device_runtime.h"
#include "client/src/gpu_runtime_util.h"
#include "common/ipc/protocol.h"

namespace hc::client {
namespace {

// ---- HIP's C ABI, as hip_runtime_api.h declares it --------------------------------------------
// hipError_t, an int-sized enum.
using HipError = int;
constexpr HipError kHipSuccess = 0;
constexpr HipError kHipErrorHostMemoryAlreadyRegistered = 712;
constexpr HipError kHipErrorStreamCaptureImplicit = 906;
// hipStream_t and hipStreamCallback_t.
using HipStream = void*;
using HipStreamCallback = void (*)(HipStream, HipError, void*);
// hipIpcMemHandle_t.
struct HipIpcMemHandle {
  char reserved[64];
};
// hipMemGenericAllocationHandle_t, an opaque pointer.
using HipMemHandle = void*;
// hipPointerAttribute_t; its first field is named `type` since 6.0.
struct HipPointerAttributes {
  int memoryType;
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
};
// hipMemoryTypeDevice. 5.x: Host 0, Device 1, Array 2, Unified 3. 6.x: Unregistered 0, Host 1,
// Device 2, Managed 3, Array 10, Unified 11.
constexpr int kHipMemoryTypeDeviceV5 = 1;
constexpr int kHipMemoryTypeDeviceV6 = 2;
// HIP_POINTER_ATTRIBUTE_BUFFER_ID: CUDA's numbering, the same in 5.x and 6.x.
constexpr int kHipPointerAttributeBufferId = 7;
// hipDeviceAttributePciBusId, PciDeviceId, PciDomainID: 67, 68, 69 in 5.x and 6.x (6.0 renamed
// the attribute before them, hipDeviceAttributeName, to Unused1, in place).
constexpr int kHipDeviceAttributePciBusId = 67;
constexpr int kHipDeviceAttributePciDeviceId = 68;
constexpr int kHipDeviceAttributePciDomainId = 69;
constexpr int kHipMemHandleTypePosixFd = 0x1;  // hipMemHandleTypePosixFileDescriptor
constexpr unsigned kHipHostRegisterPortable = 0x1;
constexpr unsigned kHipHostRegisterMapped = 0x2;
constexpr unsigned kHipStreamWaitValueGte = 0x0;
// HIP_VERSION = major * 10^7 + minor * 10^5 + patch.
constexpr int kHipVersionMajorDivisor = 10'000'000;

static_assert(sizeof(HipIpcMemHandle) == sizeof(ExportedAllocation::handle));
static_assert(sizeof(HipPointerAttributes) == 32);

// Allocation ids of the fallback below carry this bit, so they never equal a runtime buffer id
// (a 32-bit counter in HIP 5.x).
constexpr uint64_t kFallbackIdBit = 1ull << 63;

class HipRuntime final : public DeviceRuntime {
 public:
  // Null when no libamdhip64 is loaded in this process, or it lacks a call we need.
  static HipRuntime* createIfLoaded();

  const char* name() const override { return "hip"; }
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
    uintptr_t device;
  };

  // Runs a HIP call that may fail on a pointer or stream that is simply not HIP's, without
  // leaving that failure in the caller's hipGetLastError(): frameworks check it after their own
  // launches and would report our probe as their error. A failure the caller already had pending
  // is left alone (HIP offers no way to restore it, so it is not cleared either).
  template <typename Call>
  HipError quietly(Call&& call) {
    HipError prior = peekAtLastError_();
    HipError error = call();
    if (error != kHipSuccess && prior == kHipSuccess) (void)getLastError_();
    return error;
  }
  Status failure(const char* call, HipError error) const;
  // The same, naming the allocation the call was about.
  Status failure(const char* call, HipError error, const DevicePointer& p) const;
  uint64_t allocationId(const void* ptr, uintptr_t base, uint64_t bytes);
  // The PCI address of `device`; nullopt when the runtime cannot say.
  std::optional<uint32_t> pciAddress(int device);
  // Runs with the allocation's device current.
  Result<ExportedAllocation> exportLegacy(const DevicePointer& p);
  Result<ExportedAllocation> exportVmm(const DevicePointer& p, HipMemHandle handle);

  int deviceMemoryType_ = kHipMemoryTypeDeviceV6;
  HipError (*getLastError_)() = nullptr;
  HipError (*peekAtLastError_)() = nullptr;
  const char* (*getErrorName_)(HipError) = nullptr;
  HipError (*runtimeGetVersion_)(int*) = nullptr;
  HipError (*getDevice_)(int*) = nullptr;
  HipError (*setDevice_)(int) = nullptr;
  HipError (*pointerGetAttributes_)(HipPointerAttributes*, const void*) = nullptr;
  HipError (*pointerGetAttribute_)(void*, int, void*) = nullptr;  // optional
  HipError (*memGetAddressRange_)(void**, size_t*, void*) = nullptr;
  HipError (*ipcGetMemHandle_)(HipIpcMemHandle*, void*) = nullptr;
  HipError (*streamGetFlags_)(HipStream, unsigned*) = nullptr;
  // hipLaunchHostFunc when the runtime exports it (Debian's 5.2 declares it in its headers but
  // does not export it), else hipStreamAddCallback, which also holds later work on the stream
  // until the callback returns.
  HipError (*launchHostFunc_)(HipStream, HostFn, void*) = nullptr;
  HipError (*streamAddCallback_)(HipStream, HipStreamCallback, void*, unsigned) = nullptr;
  HipError (*streamWaitValue32_)(HipStream, void*, uint32_t, unsigned, uint32_t) = nullptr;
  HipError (*hostGetDevicePointer_)(void**, void*, unsigned) = nullptr;
  HipError (*hostRegister_)(void*, size_t, unsigned) = nullptr;
  HipError (*streamSynchronize_)(HipStream) = nullptr;
  HipError (*streamIsCapturing_)(HipStream, int*) = nullptr;  // optional: none is capturing
  HipError (*malloc_)(void**, size_t) = nullptr;                // optional, with free_
  HipError (*free_)(void*) = nullptr;
  HipError (*memcpyDtoHAsync_)(void*, void*, size_t, HipStream) = nullptr;  // optional
  HipError (*deviceGetAttribute_)(int*, int, int) = nullptr;
  // VMM exports; all three or none (hasVmm_).
  HipError (*memRetainAllocationHandle_)(HipMemHandle*, void*) = nullptr;
  HipError (*memExportToShareableHandle_)(void*, HipMemHandle, int, unsigned long long) = nullptr;
  HipError (*memRelease_)(HipMemHandle) = nullptr;
  bool hasVmm_ = false;

  std::mutex mutex_;
  std::vector<MappedRange> mapped_;                        // guarded by mutex_
  std::unordered_map<uintptr_t, DevicePointer> fallback_;  // guarded by mutex_; by base address
  uint64_t nextFallbackId_ = 1;                            // guarded by mutex_
  PciAddresses pciAddresses_;
};

template <typename Fn>
bool resolve(void* library, const char* name, Fn* slot) {
  *slot = reinterpret_cast<Fn>(::dlsym(library, name));
  return *slot != nullptr;
}

HipRuntime* HipRuntime::createIfLoaded() {
  void* library = nullptr;
  int sonameMajor = 0;
  for (int major : {6, 5}) {
    std::string soname = "libamdhip64.so." + std::to_string(major);
    library = ::dlopen(soname.c_str(), RTLD_NOLOAD | RTLD_LAZY);
    if (library != nullptr) {
      sonameMajor = major;
      break;
    }
  }
  if (library == nullptr) return nullptr;
  // Never closed: the runtime belongs to the process, which loaded it before us.
  auto* runtime = new HipRuntime();
  bool complete = resolve(library, "hipGetLastError", &runtime->getLastError_) &&
                  resolve(library, "hipPeekAtLastError", &runtime->peekAtLastError_) &&
                  resolve(library, "hipGetErrorName", &runtime->getErrorName_) &&
                  resolve(library, "hipRuntimeGetVersion", &runtime->runtimeGetVersion_) &&
                  resolve(library, "hipGetDevice", &runtime->getDevice_) &&
                  resolve(library, "hipSetDevice", &runtime->setDevice_) &&
                  resolve(library, "hipPointerGetAttributes", &runtime->pointerGetAttributes_) &&
                  resolve(library, "hipMemGetAddressRange", &runtime->memGetAddressRange_) &&
                  resolve(library, "hipIpcGetMemHandle", &runtime->ipcGetMemHandle_) &&
                  resolve(library, "hipStreamGetFlags", &runtime->streamGetFlags_) &&
                  resolve(library, "hipStreamWaitValue32", &runtime->streamWaitValue32_) &&
                  resolve(library, "hipHostGetDevicePointer", &runtime->hostGetDevicePointer_) &&
                  resolve(library, "hipHostRegister", &runtime->hostRegister_) &&
                  resolve(library, "hipStreamSynchronize", &runtime->streamSynchronize_) &&
                  resolve(library, "hipDeviceGetAttribute", &runtime->deviceGetAttribute_);
  if (!complete) {
    delete runtime;
    return nullptr;
  }
  (void)resolve(library, "hipPointerGetAttribute", &runtime->pointerGetAttribute_);
  (void)resolve(library, "hipStreamIsCapturing", &runtime->streamIsCapturing_);
  (void)resolve(library, "hipMemcpyDtoHAsync", &runtime->memcpyDtoHAsync_);
  if (!resolve(library, "hipMalloc", &runtime->malloc_) ||
      !resolve(library, "hipFree", &runtime->free_)) {
    runtime->malloc_ = nullptr;
    runtime->free_ = nullptr;
  }
  runtime->hasVmm_ =
      resolve(library, "hipMemRetainAllocationHandle", &runtime->memRetainAllocationHandle_) &&
      resolve(library, "hipMemExportToShareableHandle", &runtime->memExportToShareableHandle_) &&
      resolve(library, "hipMemRelease", &runtime->memRelease_);
  if (!resolve(library, "hipLaunchHostFunc", &runtime->launchHostFunc_) &&
      !resolve(library, "hipStreamAddCallback", &runtime->streamAddCallback_)) {
    delete runtime;
    return nullptr;
  }
  // The runtime's own version when it reports one (the 5.2 runtime answers 0 until a device is
  // initialised), else the soname's: both name the ABI generation.
  int version = 0;
  int major = sonameMajor;
  if (runtime->quietly([&] { return runtime->runtimeGetVersion_(&version); }) == kHipSuccess &&
      version > 0) {
    major = version / kHipVersionMajorDivisor;
  }
  runtime->deviceMemoryType_ = major >= 6 ? kHipMemoryTypeDeviceV6 : kHipMemoryTypeDeviceV5;
  return runtime;
}

Status HipRuntime::failure(const char* call, HipError error) const {
  const char* name = getErrorName_(error);
  return Status(Code::DeviceError, std::string(call) +
                                       " failed: " + (name != nullptr ? name : "hipError") + " [" +
                                       std::to_string(error) + "]");
}

Status HipRuntime::failure(const char* call, HipError error, const DevicePointer& p) const {
  return aboutAllocation(failure(call, error), "HIP", p);
}

std::optional<uint32_t> HipRuntime::pciAddress(int device) {
  return pciAddresses_.get(device, [this](int d, int* domain, int* bus, int* slot) {
    auto ask = [&](int* value, int attribute) {
      return quietly([&] { return deviceGetAttribute_(value, attribute, d); }) == kHipSuccess;
    };
    return ask(domain, kHipDeviceAttributePciDomainId) && ask(bus, kHipDeviceAttributePciBusId) &&
           ask(slot, kHipDeviceAttributePciDeviceId);
  });
}

bool HipRuntime::lookup(const void* ptr, DevicePointer* out) {
  if (ptr == nullptr) return false;
  HipPointerAttributes attributes{};
  if (quietly([&] { return pointerGetAttributes_(&attributes, ptr); }) != kHipSuccess) return false;
  // Host-registered and managed memory are not device memory: the caller stages them as host.
  if (attributes.isManaged != 0 || attributes.memoryType != deviceMemoryType_) return false;
  void* base = nullptr;
  size_t bytes = 0;
  if (quietly([&] { return memGetAddressRange_(&base, &bytes, const_cast<void*>(ptr)); }) !=
      kHipSuccess) {
    return false;
  }
  DevicePointer p;
  p.memoryType = static_cast<uint8_t>(ipc::DeviceMemory::Hip);
  p.vendor = static_cast<uint8_t>(ipc::DeviceVendor::Amd);
  p.device = attributes.device;
  p.base = reinterpret_cast<uintptr_t>(base);
  p.bytes = bytes;
  p.allocationId = allocationId(ptr, p.base, p.bytes);
  if (std::optional<uint32_t> address = pciAddress(p.device)) {
    p.hasPciAddress = true;
    p.pciAddress = *address;
  }
  *out = p;
  return true;
}

// The runtime's buffer id (HIP_POINTER_ATTRIBUTE_BUFFER_ID: in HIP 5.x and 6.x the unique id of
// the runtime's memory object, a counter never reused while the process lives; 5.x writes 32
// bits, so the upper half of `id` stays zero). When the runtime cannot say, the id is made up
// here: one per (base, size) seen, renewed when the size at a base changes. That fallback cannot
// see an allocation freed and replaced by one of the same size at the same address; the daemon's
// bounds check on import still holds, but a stale mapping could be reused, so it is a last resort.
uint64_t HipRuntime::allocationId(const void* ptr, uintptr_t base, uint64_t bytes) {
  if (pointerGetAttribute_ != nullptr) {
    uint64_t id = 0;
    if (quietly([&] {
          return pointerGetAttribute_(&id, kHipPointerAttributeBufferId, const_cast<void*>(ptr));
        }) == kHipSuccess &&
        id != 0) {
      return id;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePointer& known = fallback_[base];
  if (known.allocationId == 0 || known.bytes != bytes) {
    known.bytes = bytes;
    known.allocationId = kFallbackIdBit | nextFallbackId_++;
  }
  return known.allocationId;
}

Result<ExportedAllocation> HipRuntime::exportAllocation(const DevicePointer& p) {
  // The runtime exports through the current device: make the allocation's device current for
  // the calls and give the caller's thread its own device back afterwards.
  int previous = 0;
  HipError error = getDevice_(&previous);
  if (error != kHipSuccess) return failure("hipGetDevice", error);
  if (previous != p.device && (error = setDevice_(p.device)) != kHipSuccess) {
    return failure("hipSetDevice", error);
  }
  Result<ExportedAllocation> exported = internalError("not exported");
  HipMemHandle vmm = nullptr;
  auto retain = [&] { return memRetainAllocationHandle_(&vmm, reinterpret_cast<void*>(p.base)); };
  // Succeeds only for memory mapped with hipMemMap: a VMM allocation, which legacy IPC cannot
  // export. Any other answer means ordinary memory, and must not linger in hipGetLastError.
  if (hasVmm_ && quietly(retain) == kHipSuccess) {
    exported = exportVmm(p, vmm);
    // Drops the reference the retain took, not the allocation: its owner's mapping holds that.
    error = memRelease_(vmm);
    if (error != kHipSuccess) {
      if (exported.isOk()) ::close(exported->fd);
      exported = failure("hipMemRelease (of the retained handle)", error, p);
    }
  } else {
    exported = exportLegacy(p);
  }
  if (previous != p.device) (void)setDevice_(previous);
  return exported;
}

Result<ExportedAllocation> HipRuntime::exportVmm(const DevicePointer& p, HipMemHandle handle) {
  int fd = -1;
  HipError error = memExportToShareableHandle_(&fd, handle, kHipMemHandleTypePosixFd, 0);
  if (error != kHipSuccess) {
    Status refused = failure("hipMemExportToShareableHandle", error, p);
    return Status(refused.code(),
                  refused.message() +
                      ": it is VMM memory (hipMemCreate), which exports as an fd only when "
                      "created with hipMemHandleTypePosixFileDescriptor in hipMemAllocationProp's "
                      "requested handle type");
  }
  ExportedAllocation exported;
  exported.handleKind = static_cast<uint32_t>(ipc::HandleKind::Fd);
  exported.fd = fd;
  return exported;
}

Result<ExportedAllocation> HipRuntime::exportLegacy(const DevicePointer& p) {
  HipIpcMemHandle handle{};
  const HipError error = ipcGetMemHandle_(&handle, reinterpret_cast<void*>(p.base));
  if (error != kHipSuccess) return failure("hipIpcGetMemHandle", error, p);
  ExportedAllocation exported;
  exported.handleKind = static_cast<uint32_t>(ipc::HandleKind::LegacyIpc);
  std::memcpy(exported.handle, &handle, sizeof(handle));
  exported.fd = -1;
  return exported;
}

bool HipRuntime::ownsStream(void* stream) {
  // The runtime checks a stream against its own set before it touches it, so a foreign pointer
  // (a CUDA stream) is answered with an error, not dereferenced.
  if (stream == nullptr) return false;
  unsigned flags = 0;
  return quietly([&] { return streamGetFlags_(stream, &flags); }) == kHipSuccess;
}

// A host function carried through hipStreamAddCallback, which passes one pointer.
struct PendingHostFn {
  DeviceRuntime::HostFn fn;
  void* arg;
};

// Runs the host function even when the stream reports an error: the function submits the
// operation, whose completion is what releases the stream's later wait; the daemon reports the
// data as it finds it.
void runPendingHostFn(HipStream, HipError, void* data) {
  auto* pending = static_cast<PendingHostFn*>(data);
  pending->fn(pending->arg);
  delete pending;
}

Status HipRuntime::launchHostFunc(void* stream, HostFn fn, void* arg) {
  if (launchHostFunc_ != nullptr) {
    HipError error = launchHostFunc_(stream, fn, arg);
    if (error != kHipSuccess) return failure("hipLaunchHostFunc", error);
    return okStatus();
  }
  auto* pending = new PendingHostFn{fn, arg};
  HipError error = streamAddCallback_(stream, runPendingHostFn, pending, /*flags=*/0);
  if (error != kHipSuccess) {
    delete pending;
    return failure("hipStreamAddCallback", error);
  }
  return okStatus();
}

Status HipRuntime::waitValue32(void* stream, std::atomic<uint32_t>* word, uint32_t value) {
  auto host = reinterpret_cast<uintptr_t>(word);
  void* device = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const MappedRange& range : mapped_) {
      if (host >= range.host && host - range.host < range.bytes) {
        device = reinterpret_cast<void*>(range.device + (host - range.host));
        break;
      }
    }
  }
  if (device == nullptr) {
    HipError error = hostGetDevicePointer_(&device, word, 0);
    if (error != kHipSuccess) return failure("hipHostGetDevicePointer", error);
  }
  HipError error =
      streamWaitValue32_(stream, device, value, kHipStreamWaitValueGte, /*mask=*/0xFFFFFFFFu);
  if (error != kHipSuccess) return failure("hipStreamWaitValue32", error);
  return okStatus();
}

Status HipRuntime::registerHostMemory(void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return invalidArgument("registerHostMemory of an empty range");
  // Mapped: the GPU reads the flag where it lies (waitValue32). Portable: for every device.
  HipError error = hostRegister_(ptr, bytes, kHipHostRegisterMapped | kHipHostRegisterPortable);
  if (error != kHipSuccess && error != kHipErrorHostMemoryAlreadyRegistered) {
    return failure("hipHostRegister", error);
  }
  void* device = nullptr;
  error = hostGetDevicePointer_(&device, ptr, 0);
  if (error != kHipSuccess) return failure("hipHostGetDevicePointer", error);
  std::lock_guard<std::mutex> lock(mutex_);
  mapped_.push_back(
      MappedRange{reinterpret_cast<uintptr_t>(ptr), bytes, reinterpret_cast<uintptr_t>(device)});
  return okStatus();
}

Status HipRuntime::synchronize(void* stream) {
  HipError error = streamSynchronize_(stream);
  if (error != kHipSuccess) return failure("hipStreamSynchronize", error);
  return okStatus();
}

Status HipRuntime::checkNotCapturing(void* stream) {
  if (streamIsCapturing_ == nullptr) return okStatus();
  int capture = 0;  // hipStreamCaptureStatusNone
  const HipError error = quietly([&] { return streamIsCapturing_(stream, &capture); });
  // The null stream while another stream captures in global mode: using it would invalidate
  // that capture, as RCCL's work would.
  if (error == kHipErrorStreamCaptureImplicit) capture = 1;  // hipStreamCaptureStatusActive
  else if (error != kHipSuccess) return failure("hipStreamIsCapturing", error);
  if (capture == 0) return okStatus();
  return Status{Code::Unsupported,
                "the stream is being captured into a HIP graph; hetero-comm operations cannot be "
                "captured and replayed: issue them outside the capture"};
}

Result<void*> HipRuntime::allocateDevice(size_t bytes) {
  if (malloc_ == nullptr) return DeviceRuntime::allocateDevice(bytes);
  void* ptr = nullptr;  // on the caller's current device, as hipMalloc
  const HipError error = quietly([&] { return malloc_(&ptr, bytes); });
  if (error != kHipSuccess) return failure("hipMalloc", error);
  return ptr;
}

Status HipRuntime::freeDevice(void* ptr) {
  if (free_ == nullptr) return DeviceRuntime::freeDevice(ptr);
  const HipError error = quietly([&] { return free_(ptr); });
  if (error != kHipSuccess) return failure("hipFree", error);
  return okStatus();
}

Status HipRuntime::copyToHostAsync(void* stream, void* dst, const void* src, size_t bytes) {
  if (memcpyDtoHAsync_ == nullptr) return DeviceRuntime::copyToHostAsync(stream, dst, src, bytes);
  const HipError error =
      quietly([&] { return memcpyDtoHAsync_(dst, const_cast<void*>(src), bytes, stream); });
  if (error != kHipSuccess) return failure("hipMemcpyDtoHAsync", error);
  return okStatus();
}

}  // namespace

DeviceRuntime* hipRuntime() {
  // Built once, on first use; lives as long as the process (the runtime it wraps does too).
  static HipRuntime* const runtime = HipRuntime::createIfLoaded();
  return runtime;
}

}  // namespace hc::client
