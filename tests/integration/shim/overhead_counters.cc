#include "tests/integration/shim/overhead_counters.h"

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "hetero_comm/hc.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HC_OVERHEAD_NO_HEAP_COUNT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HC_OVERHEAD_NO_HEAP_COUNT 1
#endif
#endif

namespace hc::integ::overhead {

volatile Probe gProbe{};
Counts gCounts{};

namespace {

using AllreduceFn = hc_status_t (*)(const void*, void*, size_t, hc_dtype_t, hc_redop_t, hc_comm_t,
                                    hc_stream_t, hc_request_t*);
using WaitFn = hc_status_t (*)(hc_request_t*);

// Static TLS of the executable: reading it never allocates, so malloc may.
thread_local bool tlsMeasured = false;

AllreduceFn gRealAllreduce = nullptr;
WaitFn gRealWait = nullptr;

template <class Fn>
Fn next(const char* name) {
  void* f = ::dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "overhead_counters: no %s after this executable: %s\n", name, ::dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

void resolve() {
  if (gRealAllreduce == nullptr) gRealAllreduce = next<AllreduceFn>("hc_allreduce");
  if (gRealWait == nullptr) gRealWait = next<WaitFn>("hc_wait");
}

inline void countHeap(uint64_t (&counter)[kWindows][2]) {
  if (!tlsMeasured) return;
  const int32_t w = gProbe.window;
  if (w != kNone) ++counter[w][gProbe.hcDepth > 0 ? 1 : 0];
}

// Marks the measured thread as inside hc for the lifetime of the guard.
class InsideHc {
 public:
  InsideHc() : measured_(tlsMeasured) {
    if (!measured_) return;
    gProbe.hcDepth = gProbe.hcDepth + 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~InsideHc() {
    if (!measured_) return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    gProbe.hcDepth = gProbe.hcDepth - 1;
  }
  InsideHc(const InsideHc&) = delete;
  InsideHc& operator=(const InsideHc&) = delete;

 private:
  const bool measured_;
};

inline bool outermost() { return tlsMeasured && gProbe.hcDepth == 0; }

[[maybe_unused]] void countAlloc() { countHeap(gCounts.allocs); }
[[maybe_unused]] void countFree() { countHeap(gCounts.frees); }

}  // namespace

void measureThisThread() {
  resolve();
  tlsMeasured = true;
}

bool heapCounted() {
#if defined(HC_OVERHEAD_NO_HEAP_COUNT)
  return false;
#else
  return true;
#endif
}

void enterWindow(Window w) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  gProbe.window = w;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void leaveWindow() { enterWindow(kNone); }

}  // namespace hc::integ::overhead

using hc::integ::overhead::gCounts;
using hc::integ::overhead::gProbe;

extern "C" {

hc_status_t hc_allreduce(const void* sendbuf, void* recvbuf, size_t count, hc_dtype_t dtype,
                         hc_redop_t op, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  using namespace hc::integ::overhead;
  if (gRealAllreduce == nullptr) resolve();  // a caller before measureThisThread()
  if (outermost() && gProbe.window != kNone) ++gCounts.hcAllreduce[gProbe.window];
  InsideHc inside;
  return gRealAllreduce(sendbuf, recvbuf, count, dtype, op, comm, stream, req);
}

hc_status_t hc_wait(hc_request_t* req) {
  using namespace hc::integ::overhead;
  if (gRealWait == nullptr) resolve();
  if (outermost() && gProbe.window != kNone) ++gCounts.hcWait[gProbe.window];
  InsideHc inside;
  return gRealWait(req);
}

#if !defined(HC_OVERHEAD_NO_HEAP_COUNT)
// glibc's allocator under its exported internal names; everything else in the process, libstdc++'s
// operator new included, reaches it through these.
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);

void* malloc(size_t size) {
  hc::integ::overhead::countAlloc();
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  hc::integ::overhead::countAlloc();
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  hc::integ::overhead::countAlloc();
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  hc::integ::overhead::countAlloc();
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  hc::integ::overhead::countAlloc();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  hc::integ::overhead::countAlloc();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void free(void* p) {
  if (p != nullptr) hc::integ::overhead::countFree();
  __libc_free(p);
}
#endif

}  // extern "C"
