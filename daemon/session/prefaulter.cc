#include "daemon/session/prefaulter.h"

namespace hc::session {

Prefaulter::Prefaulter(size_t maxQueued) : maxQueued_(maxQueued), thread_([this] { run(); }) {}

Prefaulter::~Prefaulter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_one();
  thread_.join();
}

bool Prefaulter::submit(SegmentPtr segment, uint64_t offset, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (queue_.size() >= maxQueued_) return false;
  queue_.push_back(Job{std::move(segment), offset, bytes});
  wake_.notify_one();
  return true;
}

void Prefaulter::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Prefaulter::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    job.segment->prefault(job.offset, job.bytes);
    job.segment.reset();  // the last owner may be this job: unmapped here, not under the lock
    std::lock_guard lock(mutex_);
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace hc::session
