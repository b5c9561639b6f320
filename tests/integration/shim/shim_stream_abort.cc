// The abort check of a stream-check rank (h). The ranks split the job's communicator; one rank (the
// CUDA rank 0: --abort main) posts an allreduce on the job's communicator that no other rank
// posts, another (the HIP rank: --abort split) does the same on the split one. Each queues a
// kernel after its operation on the same stream, so the stream now waits on an operation that
// never completes, and aborts the communicator from a second thread. ncclCommAbort must return at
// once and release the stream: its wait ends, the kernel after it runs, and cuStreamSynchronize /
// hipStreamSynchronize returns. The other ranks abort their handles only after the aborter says
// it is done (step files), so no peer's departure releases the stream first.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/shim/shim_stream_rank.h"

namespace hc::shim_stream {
namespace {

using Clock = std::chrono::steady_clock;

// Long enough that the stream sits in its wait when the abort comes.
constexpr auto kAbortAfter = std::chrono::milliseconds(300);
// ncclCommAbort never blocks; this bound only tells a blocked call from a quick one.
constexpr auto kAbortReturnLimit = std::chrono::seconds(2);
// How soon after the abort the stream must be released: well below the other ranks' wait for the
// aborter's step file (shim_stream_rank.cc), after which they abort their own handles, which
// would release the stream too, without this rank's abort.
constexpr auto kReleaseLimit = std::chrono::seconds(5);

void mark(void* arg) { static_cast<std::atomic<int>*>(arg)->store(1); }

// The buffers of the operation left waiting: ncclMemAlloc memory where the daemon maps it.
class WaitingBuffers {
 public:
  WaitingBuffers(Rank& r, bool device) : r_(r), device_(device) {
    send = allocate();
    recv = allocate();
  }
  ~WaitingBuffers() {
    for (void* p : {send, recv}) {
      if (device_ && p != nullptr) expectOk(r_, "ncclMemFree", ncclMemFree(p));
    }
  }
  void* send = nullptr;
  void* recv = nullptr;

 private:
  void* allocate() {
    void* p = nullptr;
    if (!device_) {
      host_.push_back(std::make_unique<float[]>(kCount));
      return host_.back().get();
    }
    return expectOk(r_, "ncclMemAlloc", ncclMemAlloc(&p, kCount * sizeof(float))) ? p : nullptr;
  }

  Rank& r_;
  bool device_;
  std::vector<std::unique_ptr<float[]>> host_;
};

// What the log shows of the stream after `anchor`: when its done-flag wait ended and when the
// kernel queued after the operation ended (0: never).
struct Released {
  uint64_t waitSatisfied = 0;
  uint64_t laterKernelEnd = 0;
};

Released releasedAt(const std::vector<LogLine>& lines) {
  Released at;
  for (const LogLine& l : lines) {
    if (l.what.rfind("wait ", 0) == 0 && l.what.find(" satisfied") != std::string::npos) {
      at.waitSatisfied = l.seq;
    }
    if (l.what == "kernel after-h end") at.laterKernelEnd = l.seq;
  }
  return at;
}

// Posts an operation on comm that no other rank posts, queues a kernel after it, aborts comm from
// a second thread and checks that the stream was released.
void abortWaiting(Rank& r, ncclComm_t comm, const char* which) {
  setStep("h: post an operation no other rank posts");
  const bool device = r.gpu->daemonMapsDeviceMemory();
  WaitingBuffers buffers(r, device);
  if (buffers.send == nullptr || buffers.recv == nullptr) return;
  const uint64_t anchor = r.gpu->note(std::string("h: post on the ") + which + " communicator");
  if (!expectOk(r, "h: ncclAllReduce that no other rank posts",
                ncclAllReduce(buffers.send, buffers.recv, kCount, ncclFloat32, ncclSum, comm,
                              static_cast<hcNcclStream_t>(r.stream)))) {
    return;
  }
  std::atomic<int> later{0};
  if (!r.gpu->kernel(r.stream, "after-h", 0, mark, &later)) {
    wrong(r, "h", "the fake refused the kernel after the operation");
  }
  int laterAtAbort = -1;
  uint64_t abortSeq = 0;
  ncclResult_t abortResult = ncclInternalError;
  Clock::duration abortTook{};
  Clock::time_point abortStart;
  std::thread aborter([&] {
    std::this_thread::sleep_for(kAbortAfter);
    laterAtAbort = later.load();
    abortSeq = r.gpu->note("h: ncclCommAbort from a second thread");
    abortStart = Clock::now();
    abortResult = ncclCommAbort(comm);
    abortTook = Clock::now() - abortStart;
  });
  // Returns only once the abort released the stream's wait; the watchdog names this step if not.
  setStep("h: synchronize the stream of the operation that waits for the abort");
  const bool synced = r.gpu->synchronize(r.stream);
  const auto syncedAt = Clock::now();
  aborter.join();
  const auto released = syncedAt - abortStart;  // read after join
  const auto releasedMs = std::chrono::duration_cast<std::chrono::milliseconds>(released).count();
  const Released at = releasedAt(linesOf(r.gpu->log(), r.gpu->streamName(r.stream), anchor));
  const auto tookMs = std::chrono::duration_cast<std::chrono::milliseconds>(abortTook).count();

  std::string problems;
  if (!synced) problems += "\n  the stream did not synchronize";
  if (abortResult != ncclSuccess) {
    problems += "\n  ncclCommAbort returned " + std::to_string(abortResult) + " (" +
                ncclGetErrorString(abortResult) + ")";
  }
  if (abortTook > kAbortReturnLimit) {
    problems += "\n  ncclCommAbort took " + std::to_string(tookMs) + " ms";
  }
  if (laterAtAbort != 0) {
    problems +=
        "\n  the kernel queued after the operation had run before the abort: the stream "
        "did not wait for the operation";
  }
  if (released > kReleaseLimit) {
    problems += "\n  the stream was released " + std::to_string(releasedMs) +
                " ms after the abort began: not by the abort";
  }
  if (later.load() != 1 || at.laterKernelEnd <= abortSeq || at.waitSatisfied <= abortSeq) {
    problems += "\n  after the abort (seq " + std::to_string(abortSeq) +
                ") the done-flag wait ended at seq " + std::to_string(at.waitSatisfied) +
                " and the kernel after the operation at seq " + std::to_string(at.laterKernelEnd);
  }
  if (!problems.empty()) {
    wrong(r, "h", std::string("abort of the ") + which + " communicator:" + problems);
  } else {
    pass("h", std::string("ncclCommAbort of the ") + which + " communicator from a second thread " +
                  "returned in " + std::to_string(tookMs) +
                  " ms and released the stream waiting on an operation no peer posted within " +
                  std::to_string(releasedMs) + " ms: the wait ended at seq " +
                  std::to_string(at.waitSatisfied) + ", the kernel after it ran, the stream " +
                  "synchronized");
  }
  signalStep(r, std::string("aborted-") + which);
}

void abortAfterStep(Rank& r, ncclComm_t comm, const char* which) {
  setStep("h: wait for the other rank's abort");
  waitStep(r, std::string("aborted-") + which);  // abort anyway: the rank must exit
  expectOk(r, "ncclCommAbort", ncclCommAbort(comm));
}

}  // namespace

void runAbortCheck(Rank& r) {
  setStep("ncclCommSplit");
  ncclComm_t split = nullptr;
  if (!expectOk(r, "ncclCommSplit", ncclCommSplit(r.comm, 0, r.rank, &split, nullptr)) ||
      split == nullptr) {
    expectOk(r, "ncclCommAbort", ncclCommAbort(r.comm));
    r.comm = nullptr;
    return;
  }
  switch (r.abortRole) {
    case AbortRole::Main:
      abortWaiting(r, r.comm, "main");
      abortAfterStep(r, split, "split");
      break;
    case AbortRole::Split:
      abortWaiting(r, split, "split");
      abortAfterStep(r, r.comm, "main");
      break;
    case AbortRole::None:
      abortAfterStep(r, r.comm, "main");
      abortAfterStep(r, split, "split");
      break;
  }
  r.comm = nullptr;
}

}  // namespace hc::shim_stream
