// GPU modes about resources: device memory given back once the buffers are freed (gpumemory) and
// allreduce bandwidth beside a device-to-device copy (gpuperf). See worker_gpu_modes.cc for the
// others.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "tests/integration/worker_gpu_modes.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t{1} << 20;

// gpumemory: the warm-up's size, how far below its start free memory may end, and how long the
// daemon has to let go of the freed buffers.
constexpr uint64_t kWarmUpCount = 256 * 1024;
constexpr size_t kMemorySlackBytes = 64 * kMiB;
constexpr auto kReleaseWait = std::chrono::seconds(2);
constexpr int kMemoryOps = 3;

// gpuperf: untimed and timed iterations per size (the median is reported).
constexpr int kWarmUps = 2;
constexpr int kTimed = 5;

// A host-memory barrier: every rank reached this point.
hc_status_t barrier(hc_comm_t comm) {
  hc_request_t req = nullptr;
  hc_status_t rc = hc_barrier(comm, nullptr, &req);
  return rc != HC_OK ? rc : hc_wait(&req);
}

long long mib(size_t bytes) { return static_cast<long long>(bytes / kMiB); }

// The median of `iters` runs of `once` (each returning false on failure), in microseconds; -1
// when one failed.
template <typename Fn>
double medianUs(Fn once) {
  std::vector<double> us;
  for (int i = 0; i < kWarmUps + kTimed; ++i) {
    const auto start = Clock::now();
    if (!once()) return -1;
    if (i >= kWarmUps) {
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The largest size up to `bytes` (halving, not below minBytes) for which every rank holds both
// buffers; 0 when none fits. Every rank must run the same sizes: the ranks agree on the smallest.
size_t allocateCommonSize(hc_comm_t comm, GpuRank& g, size_t bytes, size_t minBytes) {
  size_t fits = 0;
  for (size_t b = bytes; b >= minBytes && fits == 0; b /= 2) {
    if (g.send.allocate(g.device.get(), b).ok() && g.recv.allocate(g.device.get(), b).ok()) {
      fits = b;
    }
  }
  void* p = nullptr;
  if (hc_mem_alloc(&p, sizeof(uint64_t)) != HC_OK) return 0;
  auto* common = static_cast<uint64_t*>(p);
  *common = fits;
  hc_request_t req = nullptr;
  hc_status_t rc = hc_allreduce(common, common, 1, HC_UINT64, HC_MIN, comm, nullptr, &req);
  if (rc == HC_OK) rc = hc_wait(&req);
  const size_t agreed = rc == HC_OK ? *common : 0;
  (void)hc_mem_free(p);
  if (agreed != 0 && agreed != fits) {
    if (!g.send.allocate(g.device.get(), agreed).ok() ||
        !g.recv.allocate(g.device.get(), agreed).ok()) {
      return 0;
    }
  }
  return agreed;
}

}  // namespace

int runGpuMemory(hc_comm_t comm, const WorkerOptions& o) {
  GpuRank g;
  if (!g.open(o, kWarmUpCount * sizeof(float))) return kExitOpFailed;
  if (!g.device->reportsFreeMemory()) {
    std::printf("memory skipped: %s does not report free device memory\n",
                g.device->name().c_str());
    std::printf("#wrong 0\n");
    return kExitOk;
  }
  // The daemon's context and mappings come with its first device operation: not part of what the
  // buffers below must give back.
  uint64_t wrong = 0;
  watchdogNote("gpumemory: the warm-up allreduce");
  hc_status_t rc = checkedDeviceAllreduce(comm, o, g, HC_FLOAT32, kWarmUpCount, &wrong);
  g.send.reset();
  g.recv.reset();
  if (rc == HC_OK) rc = barrier(comm);
  size_t startFree = 0, total = 0;
  if (rc != HC_OK || !deviceOk(g.device->memoryInfo(&startFree, &total), "memory")) {
    printStatus("result", rc != HC_OK ? rc : HC_DEVICE_ERROR, comm);
    return kExitOpFailed;
  }
  size_t lowFree = startFree;
  auto lookAtFree = [&](size_t* freeNow) {
    size_t ignored = 0;
    bool ok = deviceOk(g.device->memoryInfo(freeNow, &ignored), "memory");
    lowFree = std::min(lowFree, *freeNow);
    return ok;
  };

  watchdogNote("gpumemory: allreduces on fresh buffers");
  const size_t bytes = std::max<uint64_t>(o.count, 1) * sizeof(float);
  if (!deviceOk(g.send.allocate(g.device.get(), bytes), "send buffer") ||
      !deviceOk(g.recv.allocate(g.device.get(), bytes), "recv buffer")) {
    return kExitOpFailed;
  }
  std::vector<void*> handles;
  for (MirroredBuffer* b : {&g.send, &g.recv}) {
    void* handle = nullptr;
    const hc_status_t registered = hc_comm_register(comm, b->device(), b->bytes(), &handle);
    if (registered == HC_OK) {
      handles.push_back(handle);
    } else {
      // TODO: drop once the client implements it; until then a buffer is registered by the first
      // operation that names it.
      std::printf("register status=%d text=%s\n", registered, hc_get_last_error(nullptr));
    }
  }
  size_t freeNow = 0;
  for (int k = 0; k < kMemoryOps && rc == HC_OK; ++k) {
    rc = checkedDeviceAllreduce(comm, o, g, HC_FLOAT32, o.count, &wrong);
    if (!lookAtFree(&freeNow)) rc = HC_DEVICE_ERROR;
  }
  for (void* handle : handles) (void)hc_comm_deregister(comm, handle);
  g.send.reset();
  g.recv.reset();
  // Every rank on this device has freed its buffers before anyone looks.
  if (rc == HC_OK) rc = barrier(comm);
  if (rc != HC_OK) {
    printStatus("result", rc, comm);
    return kExitOpFailed;
  }

  watchdogNote("gpumemory: waiting for the daemon to release the buffers");
  const auto deadline = Clock::now() + kReleaseWait;
  size_t endFree = 0;
  while (lookAtFree(&endFree) && endFree + kMemorySlackBytes < startFree &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // margin: how far end_free stayed above the lowest it may be (negative: it fell below).
  const long long margin = mib(endFree + kMemorySlackBytes) - mib(startFree);
  std::printf("memory start_free=%lld low_free=%lld end_free=%lld margin=%lld\n", mib(startFree),
              mib(lowFree), mib(endFree), margin);
  if (endFree + kMemorySlackBytes < startFree) {
    std::printf(
        "WRONG memory: %lld MiB of device memory not back %lld s after the buffers were "
        "freed\n",
        mib(startFree - endFree),
        static_cast<long long>(std::chrono::seconds(kReleaseWait).count()));
    ++wrong;
  }
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? kExitOk : kExitWrong;
}

int runGpuPerf(hc_comm_t comm, const WorkerOptions& o) {
  const size_t maxBytes = std::max<uint64_t>(o.count / sizeof(float), 1) * sizeof(float);
  const size_t minBytes = std::min(kMiB, maxBytes);
  GpuRank g;
  if (!g.open(o, minBytes)) return kExitOpFailed;
  const size_t capBytes = allocateCommonSize(comm, g, maxBytes, minBytes);
  if (capBytes == 0) {
    std::printf("error no rank holds two buffers of %zu bytes on %s\n", minBytes,
                g.device->name().c_str());
    return kExitOpFailed;
  }
  if (capBytes < maxBytes) std::printf("perf capped at %zu bytes (what fits)\n", capBytes);
  fillAllreduce<float>(g, o.rank, capBytes / sizeof(float));
  if (!deviceOk(g.send.toDevice(g.stream), "copy in") ||
      !deviceOk(g.recv.toDevice(g.stream), "copy in") ||
      !deviceOk(g.device->synchronize(g.stream), "stream")) {
    return kExitOpFailed;
  }
  hc_status_t failed = HC_OK;
  auto synchronized = [&](hc_status_t posted) {
    DeviceStatus s = posted == HC_OK ? g.device->synchronize(g.stream) : DeviceStatus{};
    hc_status_t async = HC_OK;
    (void)hc_comm_get_async_error(comm, &async);
    failed = posted != HC_OK ? posted : !s.ok() ? s.status : async;
    if (!s.ok()) std::printf("error %s\n", s.error.c_str());
    return failed == HC_OK;
  };
  const double factor = o.nranks > 1 ? 2.0 * (o.nranks - 1) / o.nranks : 0.0;
  size_t bytes = minBytes;
  for (; failed == HC_OK; bytes *= 2) {
    bytes = std::min(bytes, capBytes);
    watchdogNote("gpuperf: allreduce of " + std::to_string(bytes) + " bytes");
    const uint64_t n = bytes / sizeof(float);
    const double us = medianUs([&] {
      return synchronized(hc_allreduce(g.send.device(), g.recv.device(), n, HC_FLOAT32, HC_SUM,
                                       comm, g.stream, nullptr));
    });
    if (us < 0) break;
    const double algGBps = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    std::printf("perf allreduce bytes=%zu us=%.1f busbw_GBps=%.2f\n", bytes, us, algGBps * factor);
    std::fflush(stdout);
    if (bytes == capBytes) break;
  }
  if (failed != HC_OK) {
    printStatus("result", failed, comm);
    return kExitOpFailed;
  }
  // The last allreduce's results, before the copy below overwrites them.
  const uint64_t n = bytes / sizeof(float);
  if (!deviceOk(g.recv.toHost(g.stream, bytes), "copy out") ||
      !deviceOk(g.device->synchronize(g.stream), "stream")) {
    return kExitOpFailed;
  }
  const uint64_t wrong = wrongAllreduce<float>(g, o.nranks, n);
  watchdogNote("gpuperf: device-to-device copy");
  const double copyUs = medianUs([&] {
    return deviceOk(g.device->copy(g.recv.device(), g.send.device(), bytes, g.stream), "copy") &&
           deviceOk(g.device->synchronize(g.stream), "stream");
  });
  if (copyUs < 0) return kExitOpFailed;
  // Bytes copied per second, as cudaMemcpy bandwidth is usually quoted (each is read and written).
  std::printf("perf copy bytes=%zu GBps=%.2f\n", bytes,
              static_cast<double>(bytes) / (copyUs * 1e-6) / 1e9);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
