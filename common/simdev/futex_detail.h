// Internal to common/simdev: the futex primitives under futex_word.h and SimStream::waitValue32.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hc::simdev::detail {

// The longest a waiter sleeps before it looks again (at giveUp(), an abort, a deadline).
inline constexpr std::chrono::microseconds kWaitSlice{50000};
// Loads checked before sleeping: a few microseconds, enough for a store that is already on its
// way, far too short to matter on a 2-core machine.
inline constexpr int kSpinChecks = 2000;

// True when the word reached `value` within the spin.
bool spinUntil(const std::atomic<uint32_t>* word, uint32_t value);
// One FUTEX_WAIT (shared) while the word still holds `seen`, for at most `slice`.
void futexWait(const std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds slice);

}  // namespace hc::simdev::detail
