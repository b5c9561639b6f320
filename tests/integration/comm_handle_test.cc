// Calls that race with hc_comm_abort on one handle, from the test process. The shim's
// non-blocking ncclCommFinalize runs hc_comm_finalize on a thread of its own, and a framework's
// watchdog may call ncclCommAbort at once: the finalize thread may reach the handle before, while
// or after the abort frees it. Each call must fail cleanly (HC_UNAVAILABLE) or succeed, never
// read a freed handle, and the abort must never wait for it. The stress test repeats that race
// many times; run against a client that freed the handle at abort, it crashes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hetero_comm/hc.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Rank 0 and rank 1 of a fresh two-rank communicator, both in this process (two non-blocking
// inits, so neither waits for the other; hc_comm_init_all would do, but this runs on clients
// that predate it too).
std::pair<hc_comm_t, hc_comm_t> twoRanks() {
  hc_unique_id_t id;
  EXPECT_EQ(hc_get_unique_id(&id), HC_OK) << hc_get_last_error(nullptr);
  hc_config_t config = HC_CONFIG_INITIALIZER;
  config.blocking = 0;
  hc_comm_t c[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(hc_comm_init_rank_config(&c[r], 2, id, r, &config), HC_IN_PROGRESS)
        << hc_get_last_error(nullptr);
  }
  for (hc_comm_t comm : c) {
    hc_status_t async = HC_IN_PROGRESS;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (comm != nullptr && async == HC_IN_PROGRESS && Clock::now() < deadline) {
      EXPECT_EQ(hc_comm_get_async_error(comm, &async), HC_OK);
    }
    EXPECT_EQ(async, HC_OK) << hc_get_last_error(comm);
  }
  return {c[0], c[1]};
}

// The shim's sequence, many times over: rank 0 has an allreduce outstanding (rank 1 never posts
// its part), a thread is started to run hc_comm_finalize on it, and this thread aborts the handle
// at once, so the finalize runs before, during or after the abort. A finalize that reached the
// handle first is woken by the abort; one that came later finds it aborted.
TEST(CommAbortRaceTest, FinalizeOnAThreadRacingAnAbortEndsCleanlyEveryTime) {
  constexpr int kIterations = 1000;
  for (int i = 0; i < kIterations; ++i) {
    auto [rank0, rank1] = twoRanks();
    ASSERT_NE(rank0, nullptr);
    ASSERT_NE(rank1, nullptr);
    int32_t x = 1;
    ASSERT_EQ(hc_allreduce(&x, &x, 1, HC_INT32, HC_SUM, rank0, nullptr, nullptr), HC_OK);
    std::atomic<hc_status_t> finalized{HC_INTERNAL};
    std::string text;
    std::thread finalizer([&, comm = rank0] {
      const hc_status_t s = hc_comm_finalize(comm);
      text = hc_get_last_error(nullptr);
      finalized.store(s);
    });
    // Every other time the finalizer gets a head start, so both orders come up.
    if (i % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto abortStart = Clock::now();
    ASSERT_EQ(hc_comm_abort(rank0), HC_OK);
    const auto abortTook = Clock::now() - abortStart;
    finalizer.join();
    EXPECT_LT(abortTook, milliseconds(1000)) << "iteration " << i;
    // The allreduce never completes, so the finalize can only end by the abort.
    ASSERT_EQ(finalized.load(), HC_UNAVAILABLE) << "iteration " << i << ": " << text;
    EXPECT_EQ(hc_comm_abort(rank1), HC_OK);
  }
}

// The same, with the thread's call being the one that polls (a watchdog's
// hc_comm_get_async_error) while this thread aborts.
TEST(CommAbortRaceTest, AsyncErrorPollRacingAnAbortEndsCleanlyEveryTime) {
  constexpr int kIterations = 500;
  for (int i = 0; i < kIterations; ++i) {
    auto [rank0, rank1] = twoRanks();
    ASSERT_NE(rank0, nullptr);
    std::atomic<bool> ok{true};
    std::thread poller([&, comm = rank0] {
      hc_status_t async = HC_OK;
      for (int k = 0; k < 20 && async == HC_OK; ++k) {
        if (hc_comm_get_async_error(comm, &async) != HC_OK) ok.store(false);
      }
      if (async != HC_OK && async != HC_UNAVAILABLE) ok.store(false);
    });
    ASSERT_EQ(hc_comm_abort(rank0), HC_OK);
    poller.join();
    EXPECT_TRUE(ok.load()) << "iteration " << i;
    EXPECT_EQ(hc_comm_abort(rank1), HC_OK);
  }
}

// What a call that reaches an ended handle gets: an aborted handle fails as aborted (its async
// error says so, and a second abort is a no-op); a destroyed one is an invalid argument.
TEST(CommHandleTest, CallsOnAnEndedHandleFailCleanly) {
  auto [rank0, rank1] = twoRanks();
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  ASSERT_EQ(hc_comm_abort(rank0), HC_OK);
  EXPECT_EQ(hc_comm_finalize(rank0), HC_UNAVAILABLE);
  EXPECT_NE(std::string(hc_get_last_error(nullptr)).find("aborted"), std::string::npos);
  hc_status_t async = HC_OK;
  EXPECT_EQ(hc_comm_get_async_error(rank0, &async), HC_OK);
  EXPECT_EQ(async, HC_UNAVAILABLE);
  int n = 0;
  EXPECT_EQ(hc_comm_count(rank0, &n), HC_UNAVAILABLE);
  EXPECT_EQ(hc_comm_abort(rank0), HC_OK);
  EXPECT_EQ(hc_comm_destroy(rank0), HC_UNAVAILABLE);

  ASSERT_EQ(hc_comm_destroy(rank1), HC_OK) << hc_get_last_error(nullptr);
  EXPECT_EQ(hc_comm_finalize(rank1), HC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hc_get_last_error(nullptr)).find("destroyed"), std::string::npos);
  EXPECT_EQ(hc_comm_destroy(rank1), HC_INVALID_ARGUMENT);
  EXPECT_EQ(hc_comm_abort(rank1), HC_INVALID_ARGUMENT);
}

// A finalize waiting on an operation holds the handle: the abort from another thread returns at
// once, wakes it, and the handle outlives the wait.
TEST(CommHandleTest, AbortWakesAFinalizeWaitingOnTheHandleWithoutWaitingForIt) {
  auto [rank0, rank1] = twoRanks();
  ASSERT_NE(rank0, nullptr);
  int32_t x = 1;
  ASSERT_EQ(hc_allreduce(&x, &x, 1, HC_INT32, HC_SUM, rank0, nullptr, nullptr), HC_OK);
  std::atomic<hc_status_t> finalized{HC_INTERNAL};
  std::atomic<bool> returned{false};
  std::thread finalizer([&, comm = rank0] {
    finalized.store(hc_comm_finalize(comm));
    returned.store(true);
  });
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_FALSE(returned.load()) << "finalize returned while rank 1 withheld its part";
  const auto abortStart = Clock::now();
  ASSERT_EQ(hc_comm_abort(rank0), HC_OK);
  EXPECT_LT(Clock::now() - abortStart, milliseconds(1000));
  finalizer.join();
  EXPECT_LT(Clock::now() - abortStart, milliseconds(5000));
  EXPECT_EQ(finalized.load(), HC_UNAVAILABLE);
  EXPECT_EQ(hc_comm_abort(rank1), HC_OK);
}

}  // namespace
}  // namespace hc::integ
