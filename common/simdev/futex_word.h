// Waiting on and waking a 32-bit word that may live in memory shared between processes (a memfd
// or a shared segment), the way cuStreamWaitValue32 / cuStreamWriteValue32 pair up on a GPU.
// Uses shared (not FUTEX_PRIVATE) futexes, so a waiter in one process is woken by a store plus
// wakeWord() in another. Depends on libc only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hc::simdev {

// Wakes every FUTEX waiter (shared) on `word`. Call after storing the new value (release).
void wakeWord(std::atomic<uint32_t>* word);

// Blocks until word->load(acquire) >= value or `timeout` passed: spins briefly, then sleeps in
// FUTEX_WAIT. Returns true when the value was reached. Spurious wakes are absorbed; a timeout of
// zero is a single check.
bool waitWordFor(const std::atomic<uint32_t>* word, uint32_t value,
                 std::chrono::microseconds timeout);

}  // namespace hc::simdev
