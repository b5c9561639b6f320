// GPU modes, for scripts/gpu-check on a lent GPU (hc_gpu_worker, --device cuda:N) and in CI on a
// sim device (hc_rank_worker, --device sim:nvidia:N): the case list (gpu), stream order
// (gpuorder), and a rank killed mid-operation (gpukill). gpumemory and gpuperf are in
// worker_gpu_perf.cc.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_gpu_modes.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// gpuorder: the long work ahead of the allreduce, how long the call may keep the CPU, and when the
// receive buffer is looked at.
constexpr int kLongMs = 300;
constexpr double kPostLimitMs = 50;
constexpr auto kPeekAfter = std::chrono::milliseconds(100);
constexpr auto kOrderDeadline = std::chrono::seconds(30);

// gpukill: the allreduces a surviving rank posts (the killed rank posts only the first), and how
// long each may take to fail before it counts as hung.
constexpr int kKillOps = 3;
constexpr int kKillWaitMs = 30000;

}  // namespace

bool deviceOk(const DeviceStatus& s, const char* what) {
  if (!s.ok()) std::printf("error %s: %s\n", what, s.error.c_str());
  return s.ok();
}

bool GpuRank::open(const WorkerOptions& o, size_t bytes) {
  if (!openModeDevice(o.device, true, &device)) return false;
  return deviceOk(device->createStream(&stream), "stream") &&
         deviceOk(send.allocate(device.get(), bytes), "send buffer") &&
         deviceOk(recv.allocate(device.get(), bytes), "recv buffer");
}

hc_status_t checkedDeviceAllreduce(hc_comm_t comm, const WorkerOptions& o, GpuRank& g,
                                   hc_dtype_t dtype, uint64_t count, uint64_t* wrong) {
  const bool ints = dtype == HC_INT32;
  const size_t bytes = count * sizeof(int32_t);  // int32 or float32
  ints ? fillAllreduce<int32_t>(g, o.rank, count) : fillAllreduce<float>(g, o.rank, count);
  if (!deviceOk(g.send.toDevice(g.stream, bytes), "copy in") ||
      !deviceOk(g.recv.toDevice(g.stream, bytes), "copy in")) {
    return HC_DEVICE_ERROR;
  }
  hc_request_t req = nullptr;
  hc_status_t rc =
      hc_allreduce(g.send.device(), g.recv.device(), count, dtype, HC_SUM, comm, g.stream, &req);
  const DeviceStatus out = rc == HC_OK ? g.recv.toHost(g.stream, bytes) : DeviceStatus{};
  const DeviceStatus synced = g.device->synchronize(g.stream);
  const hc_status_t waited = req != nullptr ? hc_wait(&req) : HC_OK;
  if (rc != HC_OK) return rc;
  if (!deviceOk(out, "copy out") || !deviceOk(synced, "stream")) return HC_DEVICE_ERROR;
  if (waited != HC_OK) return waited;
  *wrong += ints ? wrongAllreduce<int32_t>(g, o.nranks, count)
                 : wrongAllreduce<float>(g, o.nranks, count);
  return HC_OK;
}

int runGpu(hc_comm_t comm, const WorkerOptions& o) {
  if (o.device.empty()) {
    std::printf("error gpu mode needs --device (sim:<vendor>:N or cuda:N)\n");
    return kExitUsage;
  }
  return runCaseList(comm, o, gpuCases(o.nranks, o.seed));
}

int runGpuOrder(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t n = o.count;
  const size_t bytes = std::max<uint64_t>(n, 1) * sizeof(int32_t);
  GpuRank g;
  if (!g.open(o, bytes)) return kExitOpFailed;
  uint64_t wrong = 0;
  // The first operation on a buffer registers it with the daemon, a round trip the timed call
  // must not include.
  watchdogNote("gpuorder: the warm-up allreduce");
  hc_status_t rc = checkedDeviceAllreduce(comm, o, g, HC_INT32, n, &wrong);
  fillAllreduce<int32_t>(g, o.rank, n);
  if (rc != HC_OK || !deviceOk(g.recv.toDevice(g.stream, bytes), "copy in") ||
      !deviceOk(g.device->synchronize(g.stream), "stream")) {
    printStatus("result", rc != HC_OK ? rc : HC_DEVICE_ERROR, comm);
    return kExitOpFailed;
  }

  watchdogNote("gpuorder: the allreduce behind long stream work");
  std::atomic<uint32_t> longDone{0}, opDone{0};
  const auto start = Clock::now();
  if (!deviceOk(g.device->occupyStream(g.stream, kLongMs), "long stream work") ||
      !deviceOk(g.device->signalOnStream(g.stream, &longDone), "signal")) {
    return kExitOpFailed;
  }
  const auto beforePost = Clock::now();
  hc_request_t req = nullptr;
  rc = hc_allreduce(g.send.device(), g.recv.device(), n, HC_INT32, HC_SUM, comm, g.stream, &req);
  const double postedMs = msSince(beforePost);
  if (rc != HC_OK) {
    printStatus("result", rc, comm);
    return kExitOpFailed;
  }
  if (!deviceOk(g.device->signalOnStream(g.stream, &opDone), "signal")) return kExitOpFailed;

  // While the long work runs the receive buffer must still hold what was copied in.
  std::this_thread::sleep_until(start + kPeekAfter);
  std::vector<int32_t> peek(n);
  const DeviceStatus peeked =
      g.device->copy(peek.data(), g.recv.device(), n * sizeof(int32_t), nullptr);
  const bool longStillRunning = longDone.load() == 0;
  double longEndMs = -1, doneMs = -1;
  while ((longEndMs < 0 || doneMs < 0) && Clock::now() < start + kOrderDeadline) {
    if (longEndMs < 0 && longDone.load() != 0) longEndMs = msSince(start);
    if (doneMs < 0 && opDone.load() != 0) doneMs = msSince(start);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }

  const DeviceStatus out = g.recv.toHost(g.stream);
  const DeviceStatus synced = g.device->synchronize(g.stream);
  rc = hc_wait(&req);
  std::printf("order posted_ms=%.1f done_ms=%.1f long_ms=%d long_end_ms=%.1f\n", postedMs, doneMs,
              kLongMs, longEndMs);
  if (rc != HC_OK || !deviceOk(peeked, "peek") || !deviceOk(out, "copy out") ||
      !deviceOk(synced, "stream")) {
    printStatus("result", rc != HC_OK ? rc : HC_DEVICE_ERROR, comm);
    return kExitOpFailed;
  }
  auto violated = [&](const std::string& what) {
    std::printf("WRONG order: %s\n", what.c_str());
    ++wrong;
  };
  if (postedMs > kPostLimitMs) {
    violated("hc_allreduce kept the CPU " + std::to_string(postedMs) + " ms behind stream work");
  }
  if (!longStillRunning) {
    std::printf("order peek skipped: the long work ended before %lld ms\n",
                static_cast<long long>(kPeekAfter.count()));
  } else {
    uint64_t written = 0;
    for (int32_t v : peek) written += v != -1 ? 1 : 0;
    if (written != 0) {
      violated(std::to_string(written) + " elements written while the work ahead still ran");
    }
  }
  if (doneMs < 0 || longEndMs < 0) violated("the stream did not pass the allreduce in 30 s");
  if (doneMs < longEndMs) violated("the allreduce ended before the long work ahead of it");
  wrong += wrongAllreduce<int32_t>(g, o.nranks, n);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? kExitOk : kExitWrong;
}

int runGpuKill(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t n = o.count;
  const size_t bytes = std::max<uint64_t>(n, 1) * sizeof(int32_t);
  GpuRank g;
  if (!g.open(o, bytes)) return kExitOpFailed;
  fillAllreduce<int32_t>(g, o.rank, n);
  if (!deviceOk(g.send.toDevice(g.stream), "copy in") ||
      !deviceOk(g.device->synchronize(g.stream), "stream")) {
    return kExitOpFailed;
  }
  if (o.rank == 1) {
    // Dies with its operation on the stream, maybe not yet submitted: either way its peers'
    // operations can never complete and must fail.
    (void)hc_allreduce(g.send.device(), g.recv.device(), n, HC_INT32, HC_SUM, comm, g.stream,
                       nullptr);
    std::printf("posted\n");
    std::fflush(stdout);
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();
  }
  std::vector<hc_request_t> reqs(kKillOps, nullptr);
  std::vector<hc_status_t> statuses(kKillOps, HC_OK);
  for (int k = 0; k < kKillOps; ++k) {
    statuses[k] = hc_allreduce(g.send.device(), g.recv.device(), n, HC_INT32, HC_SUM, comm,
                               g.stream, &reqs[k]);
  }
  std::printf("posted\n");
  std::fflush(stdout);
  // Clean: every operation ends, at least one fails, none succeeds after a failure, and no
  // failure is a refusal of the call itself.
  bool clean = true;
  hc_status_t firstFailure = HC_OK;
  for (int k = 0; k < kKillOps; ++k) {
    watchdogNote("gpukill: op " + std::to_string(k));
    if (statuses[k] == HC_OK && reqs[k] != nullptr) statuses[k] = waitFor(&reqs[k], kKillWaitMs);
    const hc_status_t s = statuses[k];
    std::printf("op %d status=%d text=%s\n", k, s, s == HC_OK ? "" : hc_get_last_error(comm));
    if (s == HC_TIMEOUT || s == HC_INVALID_ARGUMENT || (s == HC_OK && firstFailure != HC_OK)) {
      clean = false;
    }
    if (s != HC_OK && firstFailure == HC_OK) firstFailure = s;
  }
  // The stream must not wait forever on an operation that failed.
  if (clean) {
    watchdogNote("gpukill: the stream after the failure");
    std::printf("stream status=%d\n", g.device->synchronize(g.stream).status);
  }
  if (firstFailure == HC_OK) clean = false;
  printStatus("result", firstFailure, comm);
  std::printf("#wrong %d\n", clean ? 0 : 1);
  return clean ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
