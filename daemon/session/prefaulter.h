// Prefaulter: pre-faults what clients allocate in their segments on a thread of its own. Paying
// the page faults once, up front, keeps them out of the reductions that later touch the memory;
// doing it on the IPC thread let one client's 2 GiB allocation stall every other client for
// seconds. The allocation is answered at once; a page the client touches first is simply faulted
// by the client. The queue is bounded: beyond it an allocation is not pre-faulted at all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "daemon/session/segment.h"

namespace hc::session {

class Prefaulter {
 public:
  explicit Prefaulter(size_t maxQueued = 64);
  // Finishes the range under way, drops the rest, stops the thread.
  ~Prefaulter();
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  // Any thread. The job keeps the segment mapped until it ran. False when the queue is full.
  bool submit(SegmentPtr segment, uint64_t offset, uint64_t bytes);
  // Blocks until every job submitted so far ran (tests).
  void flush();

 private:
  struct Job {
    SegmentPtr segment;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  void run();

  const size_t maxQueued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hc::session
