// Waits on a shared 32-bit word: waitValue32 on a stream (released by a store and wakeWord, by
// giveUp, by abortWaits, by teardown), waitWordFor, and a wake from another process.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <thread>

#include "common/simdev/futex_detail.h"
#include "common/simdev/futex_word.h"
#include "common/simdev/sim_allocation.h"
#include "common/simdev/sim_stream.h"

namespace hc::simdev {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(SimWaitTest, WaitIsReleasedByAStoreAndWakeFromAnotherThread) {
  SimStream stream;
  std::atomic<uint32_t> word{0};
  uint32_t seenAfterWait = 0;
  stream.waitValue32(&word, 3);
  stream.hostFunc([&] { seenAfterWait = word.load(std::memory_order_acquire); });
  const uint64_t event = stream.record();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(10));
    word.store(2, std::memory_order_release);  // not enough yet
    wakeWord(&word);
    std::this_thread::sleep_for(milliseconds(10));
    word.store(5, std::memory_order_release);  // GEQ: more than asked also releases
    wakeWord(&word);
  });
  ASSERT_TRUE(stream.synchronize().isOk());
  writer.join();
  EXPECT_TRUE(stream.done(event));
  EXPECT_EQ(seenAfterWait, 5u) << "work after the wait ran only once the value was reached";
}

TEST(SimWaitTest, AWaitAlreadySatisfiedDoesNotBlock) {
  SimStream stream;
  std::atomic<uint32_t> word{9};
  stream.waitValue32(&word, 9);
  stream.waitValue32(&word, 0);
  auto start = Clock::now();
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_LT(secondsSince(start), 5.0);
}

TEST(SimWaitTest, GiveUpEndsTheWaitAndFailsTheStream) {
  SimStream stream;
  std::atomic<uint32_t> word{0};
  std::atomic<int> asked{0};
  bool ranAfter = false;
  stream.waitValue32(&word, 1, [&asked] { return asked.fetch_add(1) + 1 >= 2; });
  stream.hostFunc([&ranAfter] { ranAfter = true; });
  auto start = Clock::now();
  Status status = stream.synchronize();
  EXPECT_EQ(status.code(), Code::Unavailable) << status.toString();
  EXPECT_NE(status.message().find("gave up"), std::string::npos) << status.message();
  EXPECT_EQ(asked.load(), 2) << "giveUp is asked after each slice until it says yes";
  EXPECT_GE(secondsSince(start), 0.09) << "two slices of 50 ms";
  EXPECT_FALSE(ranAfter) << "the work behind an abandoned wait must not run";
}

TEST(SimWaitTest, AbortWaitsReleasesACurrentAndEveryFutureWait) {
  SimStream stream;
  std::atomic<uint32_t> word{0};
  stream.waitValue32(&word, 1);  // no giveUp: only the value or an abort ends it
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(stream.done(stream.record()));
  auto start = Clock::now();
  stream.abortWaits();
  Status status = stream.synchronize();
  EXPECT_EQ(status.code(), Code::Unavailable) << status.toString();
  EXPECT_LT(secondsSince(start), 5.0);
  // A wait enqueued after the abort does not block either (the stream is failed, so it is
  // skipped; its event completes).
  stream.waitValue32(&word, 100);
  EXPECT_FALSE(stream.synchronize().isOk());
  EXPECT_TRUE(stream.done(stream.record()));
}

TEST(SimWaitTest, DestroyingAStreamWithAPendingWaitDoesNotHang) {
  std::atomic<uint32_t> word{0};
  bool ranAfter = false;
  auto start = Clock::now();
  {
    auto stream = std::make_unique<SimStream>();
    stream->waitValue32(&word, 1);  // never satisfied
    stream->hostFunc([&ranAfter] { ranAfter = true; });
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_FALSE(ranAfter);
}

TEST(SimWaitTest, DestroyingAStreamWhoseWaitHasNotStartedDoesNotHang) {
  std::atomic<uint32_t> word{0};
  auto start = Clock::now();
  {
    SimStream stream(StreamTiming{0, 5000, 0});
    for (int i = 0; i < 5; ++i) stream.waitValue32(&word, 1);
  }
  EXPECT_LT(secondsSince(start), 5.0);
}

TEST(SimWaitTest, WaitWordForReturnsOnValueOrTimeout) {
  std::atomic<uint32_t> word{4};
  EXPECT_TRUE(waitWordFor(&word, 4, std::chrono::microseconds(0)));
  EXPECT_FALSE(waitWordFor(&word, 5, std::chrono::microseconds(0)));
  auto start = Clock::now();
  EXPECT_FALSE(waitWordFor(&word, 5, std::chrono::microseconds(30000)));
  EXPECT_GE(secondsSince(start), 0.029);
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(10));
    word.store(5, std::memory_order_release);
    wakeWord(&word);
  });
  EXPECT_TRUE(waitWordFor(&word, 5, std::chrono::microseconds(30 * 1000 * 1000)));
  writer.join();
}

// The wake itself, not the slice timeout, ends the sleep: one FUTEX_WAIT of 20 s returns long
// before that when another thread wakes the word.
TEST(SimWaitTest, WakeWordEndsAFutexSleepEarly) {
  std::atomic<uint32_t> word{0};
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(30));
    word.store(1, std::memory_order_release);
    wakeWord(&word);
  });
  auto start = Clock::now();
  while (word.load(std::memory_order_acquire) == 0) {
    detail::futexWait(&word, 0, std::chrono::seconds(20));
  }
  EXPECT_LT(secondsSince(start), 10.0);
  waker.join();
}

// A word in a memfd shared with a child process: the child's store and wakeWord release this
// process's stream, which needs shared (not private) futexes.
TEST(SimWaitTest, AWaitIsReleasedByAnotherProcessThroughSharedMemory) {
  auto shared = SimAllocation::create(4096, "wait-word");
  ASSERT_TRUE(shared.isOk());
  auto* word = new (shared->data()) std::atomic<uint32_t>(0);
  auto start = Clock::now();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::this_thread::sleep_for(milliseconds(30));
    word->store(1, std::memory_order_release);
    wakeWord(word);
    ::_exit(0);
  }
  // A single sleep far longer than the test's bound: only the other process's wake ends it soon.
  while (word->load(std::memory_order_acquire) == 0) {
    detail::futexWait(word, 0, std::chrono::seconds(20));
  }
  EXPECT_LT(secondsSince(start), 10.0);
  SimStream stream;
  stream.waitValue32(word, 1);
  EXPECT_TRUE(stream.synchronize().isOk());
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
}

}  // namespace
}  // namespace hc::simdev
