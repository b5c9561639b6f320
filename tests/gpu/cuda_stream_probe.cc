// cuda_stream_wait_value: a stream held by cuStreamWaitValue32 on a word of host memory mapped
// into the device, released when a host thread writes the word. This is how a client's stream
// waits for the daemon's "done" flag without blocking the CPU; where the driver refuses it the
// design orders the flag with a host function on the stream (cuLaunchHostFunc) instead.
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "tests/gpu/cuda_driver.h"
#include "tests/gpu/probe.h"

namespace hc::gpuprobe {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr uint32_t kPattern = 0xC0FFEE01u;
constexpr int kFlagDelayMicros = 50'000;
constexpr int64_t kReleaseLimitMicros = 5'000'000;

}  // namespace

Outcome probeCudaStreamWaitValue(const ProbeOptions& options) {
  CudaSession session;
  if (Outcome started = session.start(options, true); started.verdict != Verdict::Pass) {
    return started;
  }
  CudaDriver& d = session.driver();
  // What the device says about stream memory operations: the v1 attribute is deprecated and
  // the NOR attribute names only one kind of wait, so both are reported and neither decides.
  const std::string attributes =
      "mem_ops_v1_attr=" +
      std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1)) +
      " wait_nor_attr=" +
      std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR)) +
      " wait_nor_v1_attr=" +
      std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1)) +
      " can_map_host_attr=" +
      std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY));

  // The flag: pinned host memory the device reads through its own address for it.
  void* host = nullptr;
  HC_PROBE_CU(d, "", memHostAlloc, &host, 4096,
              CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  // Freeing waits for the device, so an abandoned session (a stream never released) skips it.
  Undo freeHost([&] {
    if (!session.abandoned()) (void)d.memFreeHost(host);
  });
  uint32_t& flagWord = *static_cast<uint32_t*>(host);
  std::atomic_ref<uint32_t> flag(flagWord);
  flag.store(0, std::memory_order_seq_cst);
  CUdeviceptr deviceFlag = 0;
  HC_PROBE_CU(d, "", memHostGetDevicePointer, &deviceFlag, host, 0);

  CUdeviceptr buffer = 0;
  HC_PROBE_CU(d, "", memAlloc, &buffer, kBytes);
  Undo freeBuffer([&] {
    if (!session.abandoned()) (void)d.memFree(buffer);
  });
  HC_PROBE_CU(d, "", memsetD32, buffer, 0, kBytes / 4);
  HC_PROBE_CU(d, "", ctxSynchronize);
  // Non-blocking: the checks below copy on the legacy default stream, which must not wait for
  // this one.
  CUstream stream = nullptr;
  HC_PROBE_CU(d, "", streamCreate, &stream, CU_STREAM_NON_BLOCKING);
  Undo destroyStream([&] {
    if (!session.abandoned()) (void)d.streamDestroy(stream);
  });

  note("-", "cuStreamWaitValue32");
  const CUresult waited = d.streamWaitValue32(stream, deviceFlag, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (waited == CUDA_ERROR_NOT_SUPPORTED) {
    return fail(d.describe(waited, d.streamWaitValue32.name) + " " + attributes +
                "; the design falls back to a host function (cuLaunchHostFunc) for the done flag");
  }
  if (waited != CUDA_SUCCESS) {
    return fail(d.describe(waited, d.streamWaitValue32.name) + " " + attributes);
  }
  HC_PROBE_CU(d, "", memsetD32Async, buffer, kPattern, kBytes / 4, stream);

  // A host thread sets the flag after a while; meanwhile the stream must stay held.
  std::atomic<bool> flagSet{false};
  std::atomic<int64_t> setAt{0};
  std::thread setter([&] {
    ::usleep(kFlagDelayMicros);
    setAt.store(monotonicMicros());
    flag.store(1, std::memory_order_seq_cst);
    flagSet.store(true, std::memory_order_seq_cst);
  });
  Undo joinSetter([&] {
    if (setter.joinable()) setter.join();
  });

  note("-", "polling the held stream");
  int notReady = 0;
  std::string early;
  bool copiedWhileHeld = false;
  while (early.empty() && !flagSet.load(std::memory_order_seq_cst)) {
    const CUresult queried = d.streamQuery(stream);
    // Judged by the flag as it was after the query: a flag set during the call proves nothing.
    const bool setByNow = flagSet.load(std::memory_order_seq_cst);
    if (queried == CUDA_SUCCESS && !setByNow) {
      early = "cuStreamQuery said the stream was done before the flag was set";
    } else if (queried != CUDA_SUCCESS && queried != CUDA_ERROR_NOT_READY) {
      return fail(d.describe(queried, d.streamQuery.name) + " while the stream waited");
    } else if (queried == CUDA_ERROR_NOT_READY) {
      ++notReady;
    }
    if (early.empty() && !copiedWhileHeld && notReady >= 10) {
      // The memset must not have touched the buffer either.
      uint32_t first = 0;
      HC_PROBE_CU(d, "", memcpyDtoH, &first, buffer, sizeof(first));
      if (first == kPattern && !flagSet.load(std::memory_order_seq_cst)) {
        early = "the buffer held the memset's pattern before the flag was set";
      }
      copiedWhileHeld = true;
    }
    ::usleep(1000);
  }
  if (!early.empty()) {
    return fail(early + ": cuStreamWaitValue32 did not hold the stream " + attributes);
  }
  if (notReady == 0) return fail("the stream was never seen waiting " + attributes);

  // Released: poll without sleeping, to time how soon the GPU saw the host's write.
  note("-", "waiting for the stream after the flag was set");
  setter.join();
  CUresult queried = CUDA_ERROR_NOT_READY;
  while ((queried = d.streamQuery(stream)) == CUDA_ERROR_NOT_READY &&
         monotonicMicros() - setAt.load() < kReleaseLimitMicros) {
    ::sched_yield();
  }
  const int64_t releaseMicros = monotonicMicros() - setAt.load();
  if (queried == CUDA_ERROR_NOT_READY) {
    // Its teardown could wait on the stream forever; the process exit reclaims it all.
    session.abandon();
    return fail("the stream still waited " + std::to_string(kReleaseLimitMicros / 1'000'000) +
                " s after the host set the flag: the device did not see the write " + attributes);
  }
  if (queried != CUDA_SUCCESS) return fail(d.describe(queried, d.streamQuery.name));
  size_t bad = 0;
  if (std::string copied = session.countMismatches(buffer, kBytes, kPattern, &bad);
      !copied.empty()) {
    return fail(copied);
  }
  if (bad != 0) {
    return fail(std::to_string(bad) + " of " + std::to_string(kBytes / 4) +
                " words lack the memset's pattern after the stream finished");
  }
  return pass(attributes + " not_ready_polls=" + std::to_string(notReady) +
              " release_us=" + std::to_string(releaseMicros) + " bytes=" + std::to_string(kBytes));
}

}  // namespace hc::gpuprobe
