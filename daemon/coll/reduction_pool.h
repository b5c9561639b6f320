// ReductionPool: a few worker threads that run the parts of large one-pass reductions and copies.
// Workers sleep on a condition variable while there is no work; nothing spins (2-core nodes).
// Depends on the C++ standard library and common/heartbeat.h only.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/heartbeat.h"

namespace hc::coll {

class ReductionPool {
 public:
  // 0 threads: every job runs inline in submit(), for tests and single-core configurations.
  // Each worker beats a heartbeat of `heartbeats` (when given) per part, and sleeps between jobs.
  explicit ReductionPool(unsigned threads, HeartbeatBoard* heartbeats = nullptr);
  // Runs every job already submitted to completion (each `done` is called), then joins.
  ~ReductionPool();
  ReductionPool(const ReductionPool&) = delete;
  ReductionPool& operator=(const ReductionPool&) = delete;

  // Any thread may call. Never blocks on the work (with 0 threads it runs it).
  // Runs fn(0) ... fn(parts - 1), each exactly once, spread over the workers: parts of one job
  // may run at once on several workers, so fn must be safe to call concurrently for different
  // parts. When every part has returned, done() is called exactly once, on the worker that
  // finished the last part (inline when there are no threads or no parts); every effect of the
  // parts is visible to it. Jobs start in submission order and are otherwise independent.
  // fn and done must not throw, and must not call back into this pool's destructor.
  void submit(size_t parts, std::function<void(size_t)> fn, std::function<void()> done);

  unsigned threads() const { return static_cast<unsigned>(workers_.size()); }

 private:
  struct Job;

  void workerLoop(Heartbeat& beat);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mutex_; front = the job being handed out
  bool stopping_ = false;                   // guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace hc::coll
