// The contract between the CUDA tests and the stand-in driver they load by path
// (fake_libcuda.cc, fake_libcuda_client.cc; SONAME libcuda.so.1, so that once loaded the client's
// dlopen("libcuda.so.1", RTLD_NOLOAD) finds it): how to configure it (environment variables read at
// cuInit) and how to look inside it (functions found with dlsym on the already-loaded library).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace hc::device::fake_cuda {

// Comma-separated compute modes, one GPU each: "default", "exclusive", "prohibited". Unset: one
// default GPU. Empty: cuInit fails with CUDA_ERROR_NO_DEVICE.
inline constexpr const char* kDevicesVariable = "HC_FAKE_CUDA_DEVICES";
// "1": cuModuleLoadData fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (an old driver).
inline constexpr const char* kModuleLoadFailsVariable = "HC_FAKE_CUDA_MODULE_LOAD_FAILS";
// "1": cuGetProcAddress_v2 fails (as on a driver before CUDA 12), so entry points come by dlsym.
inline constexpr const char* kNoProcAddressVariable = "HC_FAKE_CUDA_NO_PROC_ADDRESS";
// A file the streams' log (fake_streams.h) is appended to as well, when set.
inline constexpr const char* kStreamLogVariable = "HC_FAKE_CUDA_LOG";

inline constexpr int kDriverVersion = 12080;
inline constexpr uint64_t kIpcMagic = 0x4350494B414B4146ull;  // tags a fake IPC handle
inline constexpr uint32_t kFatbinMagic = 0xba55ed50u;

#ifdef HC_FAKE_CUDA_PATH
// Test side: the fake's inspection functions, from the copy the backend loaded.
struct Inspector {
  using CountFn = int (*)();
  using MakeIpcHandleFn = void (*)(const void*, uint64_t, unsigned char*);
  using AddDeviceAllocationFn = void (*)(const void* base, uint64_t bytes, int device,
                                         uint64_t bufferId, int managed);
  using RemoveDeviceAllocationFn = void (*)(const void* base);
  using CreateVmmAllocationFn = void* (*)(uint64_t bytes, int device, uint64_t bufferId,
                                          int requestedHandleTypes);
  using SetPciAddressFn = void (*)(int device, int domain, int bus, int slot);
  using RetainPrimaryFn = int (*)(int device);
  using LastWaitFn = int (*)(uint64_t* address, uint32_t* value);
  using InitFn = int (*)(unsigned flags);
  using HostFn = void (*)(void*);
  using EnqueueKernelFn = int (*)(void* stream, const char* label, int delayMs, HostFn fn,
                                  void* arg);
  using SetCapturingFn = int (*)(void* stream, int capturing);
  using CopyLogFn = size_t (*)(char* out, size_t capacity);
  using StreamCreateFn = int (*)(void** stream, unsigned flags);
  using StreamFn = int (*)(void* stream);
  using PrimaryCtxRetainFn = int (*)(void** context, int device);
  using PrimaryCtxReleaseFn = int (*)(int device);
  using CtxPushFn = int (*)(void* context);
  using CtxPopFn = int (*)(void** context);

  Inspector() {
    handle = dlopen(HC_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return;
    liveObjects = reinterpret_cast<CountFn>(dlsym(handle, "hcFakeCudaLiveObjects"));
    openIpcHandles = reinterpret_cast<CountFn>(dlsym(handle, "hcFakeCudaOpenIpcHandles"));
    launches = reinterpret_cast<CountFn>(dlsym(handle, "hcFakeCudaLaunches"));
    contextDepth = reinterpret_cast<CountFn>(dlsym(handle, "hcFakeCudaContextDepth"));
    makeIpcHandle = reinterpret_cast<MakeIpcHandleFn>(dlsym(handle, "hcFakeCudaMakeIpcHandle"));
    addDeviceAllocation =
        reinterpret_cast<AddDeviceAllocationFn>(dlsym(handle, "hcFakeCudaAddDeviceAllocation"));
    removeDeviceAllocation = reinterpret_cast<RemoveDeviceAllocationFn>(
        dlsym(handle, "hcFakeCudaRemoveDeviceAllocation"));
    createVmmAllocation =
        reinterpret_cast<CreateVmmAllocationFn>(dlsym(handle, "hcFakeCudaCreateVmmAllocation"));
    setPciAddress = reinterpret_cast<SetPciAddressFn>(dlsym(handle, "hcFakeCudaSetPciAddress"));
    retainPrimary = reinterpret_cast<RetainPrimaryFn>(dlsym(handle, "hcFakeCudaRetainPrimary"));
    lastWait = reinterpret_cast<LastWaitFn>(dlsym(handle, "hcFakeCudaLastWait"));
    init = reinterpret_cast<InitFn>(dlsym(handle, "cuInit"));
    enqueueKernel = reinterpret_cast<EnqueueKernelFn>(dlsym(handle, "hcFakeCudaEnqueueKernel"));
    setCapturing = reinterpret_cast<SetCapturingFn>(dlsym(handle, "hcFakeCudaSetCapturing"));
    copyLog = reinterpret_cast<CopyLogFn>(dlsym(handle, "hcFakeCudaCopyLog"));
    streamCreate = reinterpret_cast<StreamCreateFn>(dlsym(handle, "cuStreamCreate"));
    streamDestroy = reinterpret_cast<StreamFn>(dlsym(handle, "cuStreamDestroy_v2"));
    streamSynchronize = reinterpret_cast<StreamFn>(dlsym(handle, "cuStreamSynchronize"));
    primaryCtxRetain =
        reinterpret_cast<PrimaryCtxRetainFn>(dlsym(handle, "cuDevicePrimaryCtxRetain"));
    primaryCtxRelease =
        reinterpret_cast<PrimaryCtxReleaseFn>(dlsym(handle, "cuDevicePrimaryCtxRelease_v2"));
    ctxPush = reinterpret_cast<CtxPushFn>(dlsym(handle, "cuCtxPushCurrent_v2"));
    ctxPop = reinterpret_cast<CtxPopFn>(dlsym(handle, "cuCtxPopCurrent_v2"));
  }
  // Kept loaded: the backend never unloads a driver that initialized, and neither do we.
  bool ok() const {
    return liveObjects && openIpcHandles && launches && contextDepth && makeIpcHandle &&
           addDeviceAllocation && removeDeviceAllocation && createVmmAllocation && setPciAddress &&
           retainPrimary && lastWait && init && enqueueKernel && setCapturing && copyLog &&
           streamCreate && streamDestroy && streamSynchronize && primaryCtxRetain &&
           primaryCtxRelease && ctxPush && ctxPop;
  }
  // The log of the streams so far (fake_streams.h: "<seq> <stream> <what>" lines).
  std::string log() const {
    std::string text(copyLog(nullptr, 0), '\0');
    copyLog(text.data(), text.size() + 1);
    return text;
  }

  void* handle = nullptr;
  CountFn liveObjects = nullptr;     // contexts retained + every live driver object
  CountFn openIpcHandles = nullptr;  // legacy IPC handles open
  CountFn launches = nullptr;        // kernels launched so far
  CountFn contextDepth = nullptr;    // contexts pushed on the calling thread
  MakeIpcHandleFn makeIpcHandle = nullptr;
  // The client side: declare a "device allocation" (and forget it); create a device's primary
  // context as a framework's runtime would; the last cuStreamWaitValue32 (returns how many there
  // were).
  AddDeviceAllocationFn addDeviceAllocation = nullptr;
  RemoveDeviceAllocationFn removeDeviceAllocation = nullptr;
  // A VMM allocation (a memfd mapped shared; null on failure), forgotten with
  // removeDeviceAllocation; and where the PCI attributes place a device.
  CreateVmmAllocationFn createVmmAllocation = nullptr;
  SetPciAddressFn setPciAddress = nullptr;
  RetainPrimaryFn retainPrimary = nullptr;
  LastWaitFn lastWait = nullptr;
  InitFn init = nullptr;  // cuInit, as the framework calls it before the client
  // Streams (fake_streams.h): a test "kernel" (a delay, then fn(arg), on the stream's worker), a
  // stream marked as capturing, the log; and the driver calls a framework makes streams with.
  EnqueueKernelFn enqueueKernel = nullptr;
  SetCapturingFn setCapturing = nullptr;
  CopyLogFn copyLog = nullptr;
  StreamCreateFn streamCreate = nullptr;  // cuStreamCreate: needs a current context
  StreamFn streamDestroy = nullptr;
  StreamFn streamSynchronize = nullptr;
  PrimaryCtxRetainFn primaryCtxRetain = nullptr;
  PrimaryCtxReleaseFn primaryCtxRelease = nullptr;
  CtxPushFn ctxPush = nullptr;
  CtxPopFn ctxPop = nullptr;
};
#endif

}  // namespace hc::device::fake_cuda
