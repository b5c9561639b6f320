#include "common/simdev/sim_stream.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "common/simdev/futex_detail.h"
#include "common/simdev/futex_word.h"

namespace hc::simdev {
namespace {

// Below this a delay is slept plainly: a condition variable's wake-up costs more than the delay.
constexpr std::chrono::microseconds kInterruptibleDelay{2000};

}  // namespace

std::chrono::microseconds simulatedDelay(const StreamTiming& timing, uint64_t timedBytes,
                                         TaskKind kind) {
  double us = static_cast<double>(timing.latencyUs) + static_cast<double>(timing.extraDelayUs);
  const double gbps = kind == TaskKind::Copy ? timing.copyGBps : timing.kernelGBps;
  // GB/s is 1e3 bytes per microsecond.
  if (gbps > 0) us += static_cast<double>(timedBytes) / (gbps * 1e3);
  return std::chrono::microseconds(static_cast<int64_t>(std::ceil(us)));
}

SimStream::SimStream(StreamTiming timing) : timing_(timing), worker_([this] { workerLoop(); }) {}

SimStream::~SimStream() {
  abortWaits();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  workCv_.notify_all();
  worker_.join();
}

void SimStream::enqueue(Task task, uint64_t timedBytes, TaskKind kind) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Queued{std::move(task), timedBytes, kind});
    ++enqueued_;
  }
  workCv_.notify_one();
}

uint64_t SimStream::record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool SimStream::done(uint64_t event) const {
  return completed_.load(std::memory_order_acquire) >= event;
}

Status SimStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  doneCv_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= target; });
  return error_;
}

Status SimStream::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void SimStream::copy(void* dst, const void* src, size_t bytes) {
  enqueue(
      [dst, src, bytes]() -> Status {
        if (bytes > 0) std::memmove(dst, src, bytes);
        return okStatus();
      },
      bytes);
}

void SimStream::hostFunc(std::function<void()> fn) {
  enqueue([fn = std::move(fn)]() -> Status {
    if (fn) fn();
    return okStatus();
  });
}

void SimStream::waitValue32(const std::atomic<uint32_t>* word, uint32_t value,
                            std::function<bool()> giveUp) {
  enqueue([this, word, value, giveUp = std::move(giveUp)]() -> Status {
    return waitOnWord(word, value, giveUp);
  });
}

void SimStream::abortWaits() {
  {
    // Under the mutex, so that a delay between its predicate check and its sleep cannot miss it.
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_.store(true);
  }
  abortCv_.notify_all();
  // Wakes every waiter on that word, ours among them; the others see no change and sleep again.
  if (const std::atomic<uint32_t>* word = waitingOn_.load()) {
    wakeWord(const_cast<std::atomic<uint32_t>*>(word));
  }
}

Status SimStream::waitOnWord(const std::atomic<uint32_t>* word, uint32_t value,
                             const std::function<bool()>& giveUp) {
  if (detail::spinUntil(word, value)) return okStatus();
  while (true) {
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (seen >= value) return okStatus();
    // Published before aborted_ is checked, and abortWaits() stores aborted_ before reading it
    // (both sequentially consistent): either we see the abort here or it wakes our futex. A wake
    // that lands between this check and the FUTEX_WAIT is lost, which costs one slice at most.
    waitingOn_.store(word);
    if (aborted_.load()) {
      waitingOn_.store(nullptr);
      return unavailable("stream wait aborted (the stream is being torn down)");
    }
    detail::futexWait(word, seen, detail::kWaitSlice);
    waitingOn_.store(nullptr);
    if (word->load(std::memory_order_acquire) >= value) return okStatus();
    if (aborted_.load()) return unavailable("stream wait aborted (the stream is being torn down)");
    if (giveUp && giveUp()) {
      return unavailable("stream wait for value " + std::to_string(value) +
                         " gave up (the word holds " +
                         std::to_string(word->load(std::memory_order_acquire)) + ")");
    }
  }
}

void SimStream::sleepFor(std::chrono::microseconds delay) {
  if (delay.count() <= 0 || aborted_.load(std::memory_order_relaxed)) return;
  if (delay < kInterruptibleDelay) {
    std::this_thread::sleep_for(delay);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  abortCv_.wait_for(lock, delay, [&] { return aborted_.load(); });
}

void SimStream::workerLoop() {
  while (true) {
    Queued item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      workCv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything queued has finished
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    // A failed stream skips the task and its delay; its event still completes.
    if (!failed_.load(std::memory_order_acquire)) {
      sleepFor(simulatedDelay(timing_, item.timedBytes, item.kind));
      Status status = item.task();
      if (!status.isOk()) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.isOk()) error_ = std::move(status);
        failed_.store(true, std::memory_order_release);
      }
    }
    // The task's captures (descriptor copies, callbacks) go before the event completes, so that
    // whatever they reference may be freed as soon as done() says so.
    item.task = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_.fetch_add(1, std::memory_order_acq_rel);
    }
    doneCv_.notify_all();
  }
}

}  // namespace hc::simdev
