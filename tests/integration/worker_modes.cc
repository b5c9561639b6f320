// Loop, idle and mismatch modes: the building blocks of the fault and mismatch tests.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "tests/integration/worker_modes.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

// A buffer from hc_mem_alloc, freed on scope exit.
class SharedBuffer {
 public:
  explicit SharedBuffer(size_t bytes) {
    if (hc_mem_alloc(&p_, bytes) != HC_OK) p_ = nullptr;
  }
  ~SharedBuffer() { (void)hc_mem_free(p_); }
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bool ok() const { return p_ != nullptr; }

 private:
  void* p_ = nullptr;
};

int allocFailed() {
  std::printf("result status=%d text=hc_mem_alloc: %s\n", HC_NO_RESOURCE,
              hc_get_last_error(nullptr));
  return kExitOpFailed;
}

hc_status_t waited(hc_status_t rc, hc_request_t* req) { return rc != HC_OK ? rc : hc_wait(req); }

// One int32 sum allreduce of count elements, verified. Returns the status; *wrong gets the count
// of wrong elements.
hc_status_t checkedAllreduce(hc_comm_t comm, const WorkerOptions& o, uint64_t seed,
                             const SharedBuffer& send, const SharedBuffer& recv, uint64_t count,
                             uint64_t* wrong) {
  int32_t* s = send.as<int32_t>();
  int32_t* r = recv.as<int32_t>();
  for (uint64_t j = 0; j < count; ++j) {
    s[j] = inputValue<int32_t>(seed, o.rank, j, Red::Sum, o.nranks);
  }
  std::memset(r, 0xA5, count * sizeof(int32_t));
  hc_request_t req = nullptr;
  hc_status_t rc = waited(hc_allreduce(s, r, count, HC_INT32, HC_SUM, comm, nullptr, &req), &req);
  if (rc != HC_OK) return rc;
  *wrong = 0;
  for (uint64_t j = 0; j < count; ++j) {
    if (r[j] != expectedReduction<int32_t>(seed, j, Red::Sum, o.nranks)) ++*wrong;
  }
  return HC_OK;
}

[[noreturn]] void sleepForever() {
  for (;;) ::pause();
}

}  // namespace

hc_status_t waitFor(hc_request_t* req, int timeoutMs) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    int done = 0;
    hc_status_t rc = hc_test(req, &done);
    if (done != 0 || rc != HC_OK) return rc;
    if (Clock::now() >= deadline) return HC_TIMEOUT;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

namespace {

struct WatchdogState {
  std::mutex mutex;
  std::string what = "starting";
  Clock::time_point last = Clock::now();
};

WatchdogState& watchdogState() {
  static WatchdogState* state = new WatchdogState();  // never destroyed: the thread outlives main
  return *state;
}

}  // namespace

void startWatchdog(int seconds) {
  std::thread([seconds] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      WatchdogState& s = watchdogState();
      std::lock_guard<std::mutex> lock(s.mutex);
      if (Clock::now() - s.last < std::chrono::seconds(seconds)) continue;
      std::printf("HUNG no progress for %d s in: %s\n", seconds, s.what.c_str());
      std::fflush(stdout);
      ::_exit(kExitHung);
    }
  }).detach();
}

void watchdogNote(const std::string& what) {
  WatchdogState& s = watchdogState();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.what = what;
  s.last = Clock::now();
}

void printStatus(const char* tag, hc_status_t status, hc_comm_t comm) {
  const char* text = status == HC_OK ? "" : hc_get_last_error(comm);
  std::printf("%s status=%d text=%s\n", tag, status, text != nullptr ? text : "(null)");
}

int runLoop(hc_comm_t comm, const WorkerOptions& o) {
  SharedBuffer send(o.count * sizeof(int32_t) + 4096);
  SharedBuffer recv(o.count * sizeof(int32_t) + 4096);
  SharedBuffer flag(4096);
  if (!send.ok() || !recv.ok() || !flag.ok()) return allocFailed();
  auto start = Clock::now();
  for (uint64_t iter = 1;; ++iter) {
    uint64_t wrong = 0;
    hc_status_t rc = checkedAllreduce(comm, o, o.seed + iter, send, recv, o.count, &wrong);
    if (rc != HC_OK) {
      printStatus("result", rc, comm);
      return kExitOpFailed;
    }
    if (wrong != 0) {
      std::printf("WRONG iteration %llu: %llu wrong\n#wrong %llu\n",
                  static_cast<unsigned long long>(iter), static_cast<unsigned long long>(wrong),
                  static_cast<unsigned long long>(wrong));
      return kExitWrong;
    }
    if (iter == 1 || iter % 1000 == 0)
      std::printf("progress %llu\n", static_cast<unsigned long long>(iter));
    if (o.stallAfter != 0 && iter == o.stallAfter) {
      // The peers now wait in the stop-flag broadcast of this iteration for a rank that never
      // posts it.
      std::printf("stalled\n");
      std::fflush(stdout);
      sleepForever();
    }
    // Rank 0 alone decides when to stop, so that every rank runs the same number of ops.
    int32_t* stop = flag.as<int32_t>();
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    *stop = (o.seconds > 0 && elapsed >= o.seconds) || (o.iters != 0 && iter >= o.iters);
    hc_request_t req = nullptr;
    rc = waited(hc_broadcast(stop, stop, 1, HC_INT32, 0, comm, nullptr, &req), &req);
    if (rc != HC_OK) {
      printStatus("result", rc, comm);
      return kExitOpFailed;
    }
    if (*stop != 0) {
      std::printf("iters %llu\n", static_cast<unsigned long long>(iter));
      break;
    }
  }
  hc_status_t rc = hc_comm_finalize(comm);
  printStatus("result", rc, comm);
  return rc == HC_OK ? kExitOk : kExitOpFailed;
}

int runHang(hc_comm_t comm, const WorkerOptions& o) {
  WorkerOptions hang = o;
  if (hang.stallAfter == 0) hang.stallAfter = 1;
  return runLoop(comm, hang);
}

namespace {

// One verified allreduce and "idle", then either the goFile and one more allreduce (idle), or
// hc_comm_get_async_error polled as a watchdog polls it (watchidle).
int runIdleThen(hc_comm_t comm, const WorkerOptions& o, bool watchAsync) {
  SharedBuffer send(o.count * sizeof(int32_t) + 4096);
  SharedBuffer recv(o.count * sizeof(int32_t) + 4096);
  if (!send.ok() || !recv.ok()) return allocFailed();
  uint64_t wrong = 0;
  hc_status_t rc = checkedAllreduce(comm, o, o.seed, send, recv, o.count, &wrong);
  if (rc != HC_OK || wrong != 0) {
    std::printf("warmup status=%d wrong=%llu\n", rc, static_cast<unsigned long long>(wrong));
    return rc != HC_OK ? kExitOpFailed : kExitWrong;
  }
  std::printf("idle\n");
  std::fflush(stdout);
  if (watchAsync) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    hc_status_t async = HC_OK;
    while (std::chrono::steady_clock::now() < until) {
      if (hc_comm_get_async_error(comm, &async) != HC_OK || async != HC_OK) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    printStatus("async", async, comm);
    return async == HC_OK ? kExitOk : kExitOpFailed;
  }
  struct stat st;
  while (::stat(o.goFile.c_str(), &st) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rc = checkedAllreduce(comm, o, o.seed + 1, send, recv, o.count, &wrong);
  printStatus("result", rc, comm);
  return rc == HC_OK ? kExitOk : kExitOpFailed;
}

}  // namespace

int runIdle(hc_comm_t comm, const WorkerOptions& o) { return runIdleThen(comm, o, false); }

int runWatchIdle(hc_comm_t comm, const WorkerOptions& o) { return runIdleThen(comm, o, true); }

int runMismatch(hc_comm_t comm, const WorkerOptions& o) {
  constexpr uint64_t kCount = 16;
  SharedBuffer send(4096);
  SharedBuffer recv(4096);
  if (!send.ok() || !recv.ok()) return allocFailed();
  uint64_t wrong = 0;
  hc_status_t rc = checkedAllreduce(comm, o, o.seed, send, recv, kCount, &wrong);
  printStatus("warmup", rc, comm);
  if (rc != HC_OK || wrong != 0) return rc != HC_OK ? kExitOpFailed : kExitWrong;

  // Rank 0 posts allreduce(16, int32, sum); the others differ from it in exactly one field.
  const bool odd = o.rank != 0;
  void* s = send.as<void>();
  void* r = recv.as<void>();
  hc_request_t req = nullptr;
  if (o.field == "count") {
    rc = hc_allreduce(s, r, kCount + (odd ? 1 : 0), HC_INT32, HC_SUM, comm, nullptr, &req);
  } else if (o.field == "dtype") {
    rc = hc_allreduce(s, r, kCount, odd ? HC_FLOAT32 : HC_INT32, HC_SUM, comm, nullptr, &req);
  } else if (o.field == "redop") {
    rc = hc_allreduce(s, r, kCount, HC_INT32, odd ? HC_MAX : HC_SUM, comm, nullptr, &req);
  } else if (o.field == "root") {
    rc = hc_broadcast(s, r, kCount, HC_INT32, odd ? 1 : 0, comm, nullptr, &req);
  } else if (o.field == "op") {
    rc = odd ? hc_reduce(s, r, kCount, HC_INT32, HC_SUM, 0, comm, nullptr, &req)
             : hc_allreduce(s, r, kCount, HC_INT32, HC_SUM, comm, nullptr, &req);
  } else if (o.field == "sendcount" || o.field == "senddtype") {
    // A ring exchange in one group; rank 0's send disagrees with rank 1's receive (16 int32).
    const int next = (o.rank + 1) % o.nranks;
    const int prev = (o.rank + o.nranks - 1) % o.nranks;
    const uint64_t sendCount = o.field == "sendcount" && o.rank == 0 ? kCount + 1 : kCount;
    const hc_dtype_t sendType = o.field == "senddtype" && o.rank == 0 ? HC_FLOAT32 : HC_INT32;
    hc_request_t sendReq = nullptr;
    rc = hc_group_start();
    if (rc == HC_OK) rc = hc_send(s, sendCount, sendType, next, comm, nullptr, &sendReq);
    if (rc == HC_OK) rc = hc_recv(r, kCount, HC_INT32, prev, comm, nullptr, &req);
    hc_status_t end = hc_group_end();
    if (rc == HC_OK) rc = end;
    hc_status_t sendRc = rc == HC_OK ? waitFor(&sendReq, 10000) : rc;
    hc_status_t recvRc = rc == HC_OK ? waitFor(&req, 10000) : rc;
    printStatus("result", sendRc != HC_OK ? sendRc : recvRc, comm);
    rc = checkedAllreduce(comm, o, o.seed + 1, send, recv, kCount, &wrong);
    printStatus("later", rc, comm);
    return kExitOk;
  } else {
    std::printf("unknown --field %s\n", o.field.c_str());
    return kExitUsage;
  }
  printStatus("result", waited(rc, &req), comm);
  rc = checkedAllreduce(comm, o, o.seed + 1, send, recv, kCount, &wrong);
  printStatus("later", rc, comm);
  return kExitOk;
}

}  // namespace hc::integ
