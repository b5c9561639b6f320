// SimStream: ordering, events, the sticky error, and the simulated copy-engine timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "common/simdev/futex_word.h"
#include "common/simdev/sim_stream.h"

namespace hc::simdev {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A chain of copies where each one reads what the previous one wrote: only in-order execution
// carries the first buffer's bytes to the last.
TEST(SimStreamTest, ChainedCopiesRunInEnqueueOrder) {
  constexpr size_t kLinks = 200;
  constexpr size_t kBytes = 4096;
  std::vector<std::vector<uint8_t>> bufs(kLinks + 1, std::vector<uint8_t>(kBytes, 0));
  for (size_t i = 0; i < kBytes; ++i) bufs[0][i] = static_cast<uint8_t>(i * 7 + 1);
  SimStream stream;
  for (size_t i = 0; i < kLinks; ++i) stream.copy(bufs[i + 1].data(), bufs[i].data(), kBytes);
  ASSERT_TRUE(stream.synchronize().isOk());
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(bufs[kLinks][i], static_cast<uint8_t>(i * 7 + 1)) << i;
  }
}

TEST(SimStreamTest, TasksFromSeveralKindsKeepOneOrder) {
  SimStream stream;
  std::vector<int> order;  // touched only by the worker until synchronize() returns
  int slot = -1;
  int values[3] = {10, 11, 12};
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0) stream.hostFunc([&order, i] { order.push_back(i); });
    if (i % 3 == 1) {
      stream.enqueue([&order, i] {
        order.push_back(i);
        return okStatus();
      });
    }
    if (i % 3 == 2) {
      stream.copy(&slot, &values[i % 3], sizeof(int));
      stream.hostFunc([&order, &slot, i] { order.push_back(slot == 12 ? i : -1); });
    }
  }
  ASSERT_TRUE(stream.synchronize().isOk());
  std::vector<int> expected(300);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST(SimStreamTest, EventIsDoneOnlyAfterTheWorkBeforeIt) {
  SimStream stream;
  EXPECT_EQ(stream.record(), 0u);
  EXPECT_TRUE(stream.done(0)) << "nothing enqueued: event 0 is done";
  std::atomic<uint32_t> gate{0};
  int value = 0;
  stream.waitValue32(&gate, 1);
  stream.hostFunc([&value] { value = 7; });
  const uint64_t event = stream.record();
  EXPECT_EQ(event, 2u);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(stream.done(event)) << "the wait holds the stream";
  EXPECT_TRUE(stream.done(0));
  gate.store(1, std::memory_order_release);
  wakeWord(&gate);
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_TRUE(stream.done(event));
  EXPECT_EQ(value, 7);
  EXPECT_FALSE(stream.done(event + 1)) << "an event not yet recorded is not done";
}

TEST(SimStreamTest, SynchronizeWaitsForEverythingEnqueuedBeforeIt) {
  SimStream stream(StreamTiming{0, 2000, 0});  // 2 ms per task
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) stream.hostFunc([&ran] { ran.fetch_add(1); });
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_EQ(ran.load(), 10);
  EXPECT_TRUE(stream.done(stream.record()));
}

TEST(SimStreamTest, AFailedTaskMakesTheStreamStickyFailed) {
  SimStream stream;
  int before = 0, after = 0;
  int src = 5, dst = 0;
  stream.hostFunc([&before] { before = 1; });
  stream.enqueue([] { return Status(Code::DeviceError, "first fault"); });
  const uint64_t failedAt = stream.record();
  stream.hostFunc([&after] { after = 1; });
  stream.copy(&dst, &src, sizeof(int));
  stream.enqueue([] { return Status(Code::Internal, "second fault"); });
  const uint64_t last = stream.record();
  Status status = stream.synchronize();
  EXPECT_EQ(status.code(), Code::DeviceError);
  EXPECT_EQ(status.message(), "first fault");
  EXPECT_EQ(before, 1);
  EXPECT_EQ(after, 0) << "work after the failure is skipped";
  EXPECT_EQ(dst, 0) << "a copy after the failure is skipped";
  EXPECT_TRUE(stream.done(failedAt));
  EXPECT_TRUE(stream.done(last)) << "skipped tasks still complete their events";
  EXPECT_TRUE(stream.failed());
  EXPECT_EQ(stream.error().message(), "first fault") << "the first failure stays";
  stream.hostFunc([&after] { after = 2; });
  EXPECT_EQ(stream.synchronize().message(), "first fault");
  EXPECT_EQ(after, 0);
}

TEST(SimStreamTest, AHealthyStreamReportsOk) {
  SimStream stream;
  EXPECT_TRUE(stream.error().isOk());
  EXPECT_FALSE(stream.failed());
  EXPECT_TRUE(stream.synchronize().isOk()) << "synchronize on an empty stream returns at once";
}

TEST(SimStreamTest, SimulatedDelayAddsLatencyTransferAndExtra) {
  // 1e6 bytes at 0.5 GB/s = 2000 us; plus 30 us latency and 7 us extra.
  EXPECT_EQ(simulatedDelay(StreamTiming{0.5, 30, 7}, 1000000).count(), 2037);
  EXPECT_EQ(simulatedDelay(StreamTiming{0, 30, 7}, 1000000).count(), 37) << "0 GB/s = unlimited";
  EXPECT_EQ(simulatedDelay(StreamTiming{}, uint64_t{1} << 40).count(), 0);
  EXPECT_EQ(simulatedDelay(StreamTiming{10, 0, 0}, 1).count(), 1) << "rounded up";
}

// Lower bounds only: a loaded machine makes things slower, never faster.
TEST(SimStreamTest, LatencyMakesACopyTakeAtLeastThatLong) {
  SimStream stream(StreamTiming{0, 30000, 0});  // 30 ms
  int src = 1, dst = 0;
  auto start = Clock::now();
  stream.copy(&dst, &src, sizeof(int));
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_GE(secondsSince(start), 0.029);
  EXPECT_EQ(dst, 1);
}

TEST(SimStreamTest, BandwidthMakesALargeCopyTakeItsTransferTime) {
  std::vector<uint8_t> src(1 << 20, 3), dst(1 << 20, 0);
  SimStream stream(StreamTiming{0.05, 0, 0});  // 1 MiB at 0.05 GB/s = 20.97 ms
  auto start = Clock::now();
  stream.copy(dst.data(), src.data(), src.size());
  const uint64_t event = stream.record();
  EXPECT_FALSE(stream.done(event)) << "enqueue does not block";
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_GE(secondsSince(start), 0.020);
  EXPECT_EQ(dst, src);
}

TEST(SimStreamTest, ExtraDelayAppliesToEveryTask) {
  SimStream stream(StreamTiming{0, 0, 5000});  // 5 ms per task
  auto start = Clock::now();
  for (int i = 0; i < 4; ++i) stream.hostFunc([] {});
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_GE(secondsSince(start), 0.019);
}

TEST(SimStreamTest, DestructionCutsLongDelaysShortButRunsTheWork) {
  int src = 4, dst = 0;
  auto start = Clock::now();
  {
    SimStream stream(StreamTiming{0, 30u * 1000 * 1000, 0});  // 30 s per task
    stream.copy(&dst, &src, sizeof(int));
    std::this_thread::sleep_for(milliseconds(10));  // the worker is now in the delay
  }
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_EQ(dst, 4) << "queued work still runs at teardown";
}

}  // namespace
}  // namespace hc::simdev
