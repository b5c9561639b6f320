// FakeGpu over the fake HIP runtime (tests/unit/daemon/device/hip, HC_FAKE_HIP_CLIENT_PATH), for
// the librccl.so.1 build of the stream-check rank. Its SONAME is libamdhip64.so.5, so the client's
// dlopen(RTLD_NOLOAD) finds it once loaded. HIP's C ABI is declared here, as the client declares
// it, so this builds without HIP headers. The rank's daemon loads the daemon-side fake HIP runtime
// (hc_fake_hip_daemon), which maps this runtime's device memory: hipMalloc memory by the legacy
// IPC handle that names its memfd, VMM allocations by their exported fd.
#include <dlfcn.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tests/integration/shim/shim_stream_gpu.h"

namespace hc::shim_stream {
namespace {

constexpr int kHipSuccess = 0;
constexpr int kHipMemoryTypeDevice = 1;   // hipMemoryTypeDevice of HIP 5.x (the fake's headers)
constexpr int kMemHandleTypePosixFd = 1;  // hipMemHandleTypePosixFileDescriptor
constexpr uint64_t kFirstVmmBufferId = 0x5EED0000;  // apart from hipMalloc's ids (1 << 40 on)
// hipMemCreate takes sizes in multiples of the allocation granularity (2 MiB on AMD GPUs), and the
// daemon maps whole granules: a VMM allocation is never a buffer's exact size.
constexpr size_t kVmmGranularity = size_t{2} << 20;

// hipPointerAttribute_t of HIP 5.x.
struct HipPointerAttributes {
  int memoryType;
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
};

class HipFake final : public FakeGpu {
 public:
  ~HipFake() override = default;  // the library stays loaded: streams' workers live in it

  bool open(std::string* error) {
    library_ = dlopen(HC_FAKE_HIP_CLIENT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) {
      const char* why = dlerror();
      *error = std::string("cannot load the fake HIP runtime: ") + (why ? why : "?");
      return false;
    }
    bool ok =
        find("hipSetDevice", &setDevice_) && find("hipStreamCreateWithFlags", &streamCreate_) &&
        find("hipStreamDestroy", &streamDestroy_) &&
        find("hipStreamSynchronize", &streamSynchronize_) &&
        find("hipPointerGetAttributes", &pointerGetAttributes_) &&
        find("hipMemGetAddressRange", &memGetAddressRange_) &&
        find("hcFakeHipEnqueueKernel", &enqueueKernel_) &&
        find("hcFakeHipSetCapturing", &setCapturing_) &&
        find("hcFakeHipStreamName", &streamName_) && find("hcFakeHipCopyLog", &copyLog_) &&
        find("hcFakeHipLogNote", &logNote_) && find("hcFakeHipCreateVmmAllocation", &createVmm_) &&
        find("hcFakeHipRemoveDeviceAllocation", &removeAllocation_);
    if (!ok) {
      *error = "the fake HIP runtime lacks an entry point";
      return false;
    }
    // A ROCm build of a framework selects its device before it calls RCCL.
    if (setDevice_(0) != kHipSuccess) {
      *error = "hipSetDevice(0) failed";
      return false;
    }
    return true;
  }

  const char* runtime() const override { return "hip"; }
  bool daemonMapsDeviceMemory() const override { return true; }

  void* newStream(std::string* error) override {
    void* stream = nullptr;
    const int r = streamCreate_(&stream, 0);
    if (r != kHipSuccess) *error = "hipStreamCreateWithFlags: hipError_t " + std::to_string(r);
    return r == kHipSuccess ? stream : nullptr;
  }
  bool destroyStream(void* stream) override { return streamDestroy_(stream) == kHipSuccess; }
  bool kernel(void* stream, const char* label, int delayMs, HostFn fn, void* arg) override {
    return enqueueKernel_(stream, label, delayMs, fn, arg) == kHipSuccess;
  }
  bool setCapturing(void* stream, bool capturing) override {
    return setCapturing_(stream, capturing ? 1 : 0) == kHipSuccess;
  }
  bool synchronize(void* stream) override { return streamSynchronize_(stream) == kHipSuccess; }
  std::string streamName(void* stream) override {
    char name[64] = {};
    return streamName_(stream, name, sizeof(name)) > 0 ? name : "";
  }
  uint64_t note(const std::string& text) override { return logNote_(text.c_str()); }
  std::vector<LogLine> log() override {
    std::string text(copyLog_(nullptr, 0), '\0');
    copyLog_(text.data(), text.size() + 1);
    return parseLog(text);
  }

  bool isDeviceMemory(const void* ptr, size_t* bytes) override {
    HipPointerAttributes attributes{};
    void* base = nullptr;
    size_t size = 0;
    if (pointerGetAttributes_(&attributes, ptr) != kHipSuccess ||
        attributes.memoryType != kHipMemoryTypeDevice ||
        memGetAddressRange_(&base, &size, const_cast<void*>(ptr)) != kHipSuccess || base != ptr) {
      return false;
    }
    *bytes = size;
    return true;
  }
  void* newVmmAllocation(size_t bytes) override {
    const size_t granules = (bytes + kVmmGranularity - 1) / kVmmGranularity;
    return createVmm_(granules * kVmmGranularity, 0, nextVmmId_++, kMemHandleTypePosixFd);
  }
  void freeVmmAllocation(void* base) override { removeAllocation_(base); }

 private:
  template <typename Fn>
  bool find(const char* name, Fn* slot) {
    *slot = reinterpret_cast<Fn>(dlsym(library_, name));
    return *slot != nullptr;
  }

  void* library_ = nullptr;
  int (*setDevice_)(int) = nullptr;
  int (*streamCreate_)(void**, unsigned) = nullptr;
  int (*streamDestroy_)(void*) = nullptr;
  int (*streamSynchronize_)(void*) = nullptr;
  int (*pointerGetAttributes_)(HipPointerAttributes*, const void*) = nullptr;
  int (*memGetAddressRange_)(void**, size_t*, void*) = nullptr;
  int (*enqueueKernel_)(void*, const char*, int, HostFn, void*) = nullptr;
  int (*setCapturing_)(void*, int) = nullptr;
  int (*streamName_)(void*, char*, size_t) = nullptr;
  size_t (*copyLog_)(char*, size_t) = nullptr;
  uint64_t (*logNote_)(const char*) = nullptr;
  void* (*createVmm_)(uint64_t, int, uint64_t, int) = nullptr;
  void (*removeAllocation_)(const void*) = nullptr;
  uint64_t nextVmmId_ = kFirstVmmBufferId;
};

}  // namespace

std::unique_ptr<FakeGpu> FakeGpu::load(std::string* error) {
  auto gpu = std::make_unique<HipFake>();
  if (!gpu->open(error)) return nullptr;
  return gpu;
}

}  // namespace hc::shim_stream
