#include "common/ipc/ring.h"

#include <cstdint>

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace hc::ipc {

bool futexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeoutNs) {
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeoutNs >= 0) {
    ts.tv_sec = timeoutNs / 1'000'000'000;
    ts.tv_nsec = timeoutNs % 1'000'000'000;
    tsp = &ts;
  }
  long rc = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tsp,
                      nullptr, 0);
  return !(rc < 0 && errno == ETIMEDOUT);
}

void futexWake(std::atomic<uint32_t>* word, int count) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

void signalDone(DoneFlag* flag, int32_t status) {
  if (flag->value.load(std::memory_order_acquire) != 0) return;
  flag->status = status;
  // Release: a stream that sees the value also sees the status and the operation's results.
  flag->value.store(1, std::memory_order_release);
  futexWake(&flag->value, INT32_MAX);
}

void wakeDaemonIfSleeping(SegmentHeader* header, int daemonEventFd) {
  // Pairs with the daemon's fence between setting daemonSleeping and rechecking the rings.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header->daemonSleeping.load(std::memory_order_relaxed) != 0) {
    uint64_t one = 1;
    // EAGAIN means the counter is already non-zero: the daemon will wake anyway.
    [[maybe_unused]] ssize_t n = ::write(daemonEventFd, &one, sizeof(one));
  }
}

void wakeClientIfSleeping(SegmentHeader* header) {
  header->completionFutex.fetch_add(1, std::memory_order_release);
  // Pairs with the client's fence between incrementing clientSleepers and rechecking the ring.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header->clientSleepers.load(std::memory_order_relaxed) != 0) {
    futexWake(&header->completionFutex, INT_MAX);
  }
}

}  // namespace hc::ipc
