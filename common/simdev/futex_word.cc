#include "common/simdev/futex_word.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "common/simdev/futex_detail.h"

namespace hc::simdev {
namespace detail {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit integer in memory");

uint32_t* futexAddress(const std::atomic<uint32_t>* word) {
  // The kernel reads the word; it never writes it in FUTEX_WAIT.
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(word));
}

void futexWait(const std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds slice) {
  if (slice.count() <= 0) return;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(slice.count() / 1000000);
  timeout.tv_nsec = static_cast<long>((slice.count() % 1000000) * 1000);
  // Shared (no FUTEX_PRIVATE_FLAG): the word may be mapped by another process. Any return (woken,
  // EAGAIN because the value moved, EINTR, ETIMEDOUT) sends the caller back to re-check.
  ::syscall(SYS_futex, futexAddress(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

bool spinUntil(const std::atomic<uint32_t>* word, uint32_t value) {
  for (int i = 0; i < kSpinChecks; ++i) {
    if (word->load(std::memory_order_acquire) >= value) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return word->load(std::memory_order_acquire) >= value;
}

}  // namespace detail

void wakeWord(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, detail::futexAddress(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool waitWordFor(const std::atomic<uint32_t>* word, uint32_t value,
                 std::chrono::microseconds timeout) {
  using Clock = std::chrono::steady_clock;
  if (detail::spinUntil(word, value)) return true;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (seen >= value) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    detail::futexWait(word, seen, std::min(left, detail::kWaitSlice));
  }
}

}  // namespace hc::simdev
