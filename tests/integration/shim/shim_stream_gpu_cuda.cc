// FakeGpu over the fake CUDA driver (tests/unit/daemon/device/cuda, HC_FAKE_CUDA_PATH), for the
// libnccl.so.2 build of the stream-check rank. Loaded by path with the unit tests' Inspector; its
// SONAME is libcuda.so.1, so the client's dlopen("libcuda.so.1", RTLD_NOLOAD) finds it.
#include <dlfcn.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tests/integration/shim/shim_stream_gpu.h"
#include "tests/unit/daemon/device/cuda/fake_cuda.h"

namespace hc::shim_stream {
namespace {

namespace fake_cuda = hc::device::fake_cuda;

constexpr unsigned kStreamNonBlocking = 0x1;        // CU_STREAM_NON_BLOCKING
constexpr int kPointerAttributeMemoryType = 2;      // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;           // CU_MEMORYTYPE_DEVICE
constexpr int kMemHandleTypePosixFd = 0x1;          // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr uint64_t kFirstVmmBufferId = 0x5EED0000;  // apart from cuMemAlloc's ids (1 << 40 on)
// cuMemCreate takes sizes in multiples of the allocation granularity (2 MiB on GPUs), and the
// daemon maps whole granules: a VMM allocation is never a buffer's exact size.
constexpr size_t kVmmGranularity = size_t{2} << 20;

class CudaFake final : public FakeGpu {
 public:
  bool open(std::string* error) {
    if (!fake_.ok()) {
      const char* why = dlerror();
      *error = std::string("cannot load the fake CUDA driver at ") + HC_FAKE_CUDA_PATH + ": " +
               (why != nullptr ? why : "an entry point is missing");
      return false;
    }
    pointerGetAttribute_ =
        reinterpret_cast<PointerGetAttributeFn>(dlsym(fake_.handle, "cuPointerGetAttribute"));
    memGetAddressRange_ =
        reinterpret_cast<AddressRangeFn>(dlsym(fake_.handle, "cuMemGetAddressRange_v2"));
    streamName_ = reinterpret_cast<StreamNameFn>(dlsym(fake_.handle, "hcFakeCudaStreamName"));
    logNote_ = reinterpret_cast<LogNoteFn>(dlsym(fake_.handle, "hcFakeCudaLogNote"));
    if (!pointerGetAttribute_ || !memGetAddressRange_ || !streamName_ || !logNote_) {
      *error = "the fake CUDA driver lacks a pointer, stream-name or log entry point";
      return false;
    }
    // What a CUDA build of a framework has done before it calls NCCL: cuInit, then device 0's
    // primary context made current on the thread that issues the collectives.
    int r = fake_.init(0);
    if (r == 0) r = fake_.primaryCtxRetain(&context_, 0);
    if (r == 0) r = fake_.ctxPush(context_);
    if (r != 0) {
      *error = "fake CUDA setup (cuInit, primary context of device 0) failed: CUresult " +
               std::to_string(r);
      return false;
    }
    return true;
  }

  const char* runtime() const override { return "cuda"; }
  bool daemonMapsDeviceMemory() const override { return true; }

  void* newStream(std::string* error) override {
    void* stream = nullptr;
    const int r = fake_.streamCreate(&stream, kStreamNonBlocking);
    if (r != 0) *error = "cuStreamCreate: CUresult " + std::to_string(r);
    return r == 0 ? stream : nullptr;
  }
  bool destroyStream(void* stream) override { return fake_.streamDestroy(stream) == 0; }
  bool kernel(void* stream, const char* label, int delayMs, HostFn fn, void* arg) override {
    return fake_.enqueueKernel(stream, label, delayMs, fn, arg) == 0;
  }
  bool setCapturing(void* stream, bool capturing) override {
    return fake_.setCapturing(stream, capturing ? 1 : 0) == 0;
  }
  bool synchronize(void* stream) override { return fake_.streamSynchronize(stream) == 0; }
  std::string streamName(void* stream) override {
    char name[64] = {};
    return streamName_(stream, name, sizeof(name)) > 0 ? name : "";
  }
  uint64_t note(const std::string& text) override { return logNote_(text.c_str()); }
  std::vector<LogLine> log() override { return parseLog(fake_.log()); }

  bool isDeviceMemory(const void* ptr, size_t* bytes) override {
    const auto address = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr));
    unsigned type = 0;
    unsigned long long base = 0;
    size_t size = 0;
    if (pointerGetAttribute_(&type, kPointerAttributeMemoryType, address) != 0 ||
        type != kMemoryTypeDevice || memGetAddressRange_(&base, &size, address) != 0 ||
        base != address) {
      return false;
    }
    *bytes = size;
    return true;
  }
  void* newVmmAllocation(size_t bytes) override {
    const size_t granules = (bytes + kVmmGranularity - 1) / kVmmGranularity;
    return fake_.createVmmAllocation(granules * kVmmGranularity, 0, nextVmmId_++,
                                     kMemHandleTypePosixFd);
  }
  void freeVmmAllocation(void* base) override { fake_.removeDeviceAllocation(base); }

 private:
  using PointerGetAttributeFn = int (*)(void*, int, unsigned long long);
  using AddressRangeFn = int (*)(unsigned long long*, size_t*, unsigned long long);
  using StreamNameFn = int (*)(void*, char*, size_t);
  using LogNoteFn = uint64_t (*)(const char*);

  // Loads HC_FAKE_CUDA_PATH (RTLD_LOCAL) and finds the controls; kept loaded for the process.
  fake_cuda::Inspector fake_;
  PointerGetAttributeFn pointerGetAttribute_ = nullptr;
  AddressRangeFn memGetAddressRange_ = nullptr;
  StreamNameFn streamName_ = nullptr;
  LogNoteFn logNote_ = nullptr;
  void* context_ = nullptr;
  uint64_t nextVmmId_ = kFirstVmmBufferId;
};

}  // namespace

std::unique_ptr<FakeGpu> FakeGpu::load(std::string* error) {
  auto gpu = std::make_unique<CudaFake>();
  if (!gpu->open(error)) return nullptr;
  return gpu;
}

}  // namespace hc::shim_stream
