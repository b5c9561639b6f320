#include "daemon/coll/reduction_pool.h"

#include <pthread.h>

#include <atomic>
#include <string>

namespace hc::coll {

struct ReductionPool::Job {
  size_t parts;
  std::function<void(size_t)> fn;
  std::function<void()> done;
  size_t next = 0;                   // next part to hand out; guarded by the pool's mutex_
  std::atomic<size_t> remaining{0};  // parts not yet finished
};

ReductionPool::ReductionPool(unsigned threads, HeartbeatBoard* heartbeats) {
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    // Named so that a stuck reduction is easy to find in top, gdb and the watchdog's log.
    std::string name = "hc-reduce-" + std::to_string(i);
    std::shared_ptr<Heartbeat> beat =
        heartbeats != nullptr ? heartbeats->add(name) : std::make_shared<Heartbeat>(name);
    workers_.emplace_back([this, beat] { workerLoop(*beat); });
    ::pthread_setname_np(workers_.back().native_handle(), name.c_str());
  }
}

ReductionPool::~ReductionPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // Workers leave only once the queue is empty, so no submitted job is dropped.
  for (auto& t : workers_) t.join();
}

void ReductionPool::submit(size_t parts, std::function<void(size_t)> fn,
                           std::function<void()> done) {
  if (parts == 0 || workers_.empty()) {
    for (size_t i = 0; i < parts; ++i) fn(i);
    done();
    return;
  }
  auto job = std::make_shared<Job>();
  job->parts = parts;
  job->fn = std::move(fn);
  job->done = std::move(done);
  job->remaining.store(parts, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  // Wake no more workers than there are parts to take.
  if (parts >= workers_.size()) {
    wake_.notify_all();
  } else {
    for (size_t i = 0; i < parts; ++i) wake_.notify_one();
  }
}

void ReductionPool::workerLoop(Heartbeat& beat) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    beat.sleeping(true);
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    beat.sleeping(false);
    if (queue_.empty()) return;  // stopping, and every job has been handed out
    // Parts are handed out one at a time under the mutex: a part is a large piece of memory
    // traffic, so the lock costs nothing next to it, and a free worker always finds work.
    std::shared_ptr<Job> job = queue_.front();
    const size_t part = job->next++;
    if (job->next == job->parts) queue_.pop_front();
    lock.unlock();
    job->fn(part);
    // acq_rel: the last finisher acquires every other part's writes before calling done().
    if (job->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) job->done();
    job.reset();  // release the callables outside the lock
    lock.lock();
  }
}

}  // namespace hc::coll
