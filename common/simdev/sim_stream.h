// SimStream: a simulated GPU stream, one worker thread that runs tasks in enqueue order, with a
// simulated copy-engine speed and CUDA's sticky-error rule. Used by daemon/device/sim and by the
// client's sim runtime. Depends on hc_common only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace hc::simdev {

// Speed of a simulated copy engine and kernels: before it runs, each task sleeps
// latencyUs + timedBytes / rate (0 = unlimited) + extraDelayUs, the rate being copyGBps for a
// copy and kernelGBps for a kernel. 1 GB = 1e9 bytes.
struct StreamTiming {
  double copyGBps = 0;
  uint32_t latencyUs = 0;
  uint32_t extraDelayUs = 0;
  // 0: a kernel pays the latency and its own run time only (a GPU kernel reads device memory
  // far faster than a copy engine moves bytes over PCIe, so the real reduction is the cost).
  double kernelGBps = 0;
};

enum class TaskKind : uint8_t { Copy, Kernel };

// The simulated delay of one task of `timedBytes` bytes under `timing`.
std::chrono::microseconds simulatedDelay(const StreamTiming& timing, uint64_t timedBytes,
                                         TaskKind kind = TaskKind::Copy);

// One worker thread runs tasks in enqueue order, like a GPU stream. After a task fails the stream
// is failed (sticky, like a CUDA sticky error): later tasks are skipped without their delay
// (their events still complete) and error() returns the first failure.
// Threads: every method may be called from any thread except the worker itself (a task must not
// call synchronize() on its own stream). Tasks enqueued from several threads run in the order
// the enqueue() calls happened.
class SimStream {
 public:
  // Runs on the worker. Returning a non-Ok status fails the stream.
  using Task = std::function<Status()>;

  explicit SimStream(StreamTiming timing = {});
  // abortWaits(), then runs (or skips, if failed) what is queued, then joins the worker.
  ~SimStream();
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  // Non-blocking. `timedBytes` sets the task's simulated transfer time (see StreamTiming).
  void enqueue(Task task, uint64_t timedBytes = 0, TaskKind kind = TaskKind::Copy);
  // Non-blocking. An event is the count of tasks enqueued so far; it is done once every task up
  // to that one has finished. Event 0 (nothing enqueued yet) is always done.
  uint64_t record();
  bool done(uint64_t event) const;
  // Blocks until every task enqueued before the call finished; returns error().
  Status synchronize();
  // Ok, or the first failure (sticky).
  Status error() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }

  // Convenience tasks.
  // memmove on the worker, timed by `bytes`. Both ranges must stay valid until it ran.
  void copy(void* dst, const void* src, size_t bytes);
  // Runs fn on the worker (untimed apart from latency and extra delay); it cannot fail.
  void hostFunc(std::function<void()> fn);
  // Later tasks wait until word->load(acquire) >= value (cuStreamWaitValue32 with GEQ). The
  // worker spins briefly, then FUTEX_WAITs (shared: the word may be in memory shared with
  // another process) in slices of at most 50 ms; after each slice it calls giveUp() (if set) and
  // stops waiting when it returns true (giveUp runs on the worker and must not block). It never
  // waits unbounded without checking giveUp.
  // A wait that ends by giveUp() or abortWaits() fails the stream with Unavailable: the work
  // after it was waiting for data that never came. `word` must stay valid until the wait ended.
  void waitValue32(const std::atomic<uint32_t>* word, uint32_t value,
                   std::function<bool()> giveUp = {});
  // Every current and future waitValue32 returns at once (teardown), and simulated delays are cut
  // short; queued tasks still run unless a wait failed the stream. Irreversible. An abort racing
  // the worker's entry into FUTEX_WAIT costs at most one 50 ms slice.
  void abortWaits();

 private:
  struct Queued {
    Task task;
    uint64_t timedBytes;
    TaskKind kind;
  };

  void workerLoop();
  void sleepFor(std::chrono::microseconds delay);
  Status waitOnWord(const std::atomic<uint32_t>* word, uint32_t value,
                    const std::function<bool()>& giveUp);

  const StreamTiming timing_;

  mutable std::mutex mutex_;
  std::condition_variable workCv_;   // worker: queue not empty or stopping
  std::condition_variable doneCv_;   // synchronize(): completed_ advanced
  std::condition_variable abortCv_;  // simulated delays: abortWaits() was called
  std::deque<Queued> queue_;         // guarded by mutex_
  uint64_t enqueued_ = 0;            // guarded by mutex_
  bool stopping_ = false;            // guarded by mutex_
  Status error_;                     // guarded by mutex_; the first failure

  std::atomic<uint64_t> completed_{0};  // tasks finished (ran or skipped), in order
  std::atomic<bool> failed_{false};
  std::atomic<bool> aborted_{false};
  // The word the worker is futex-waiting on, so that abortWaits() can wake it.
  std::atomic<const std::atomic<uint32_t>*> waitingOn_{nullptr};

  std::thread worker_;  // last: starts after every member above is constructed
};

}  // namespace hc::simdev
