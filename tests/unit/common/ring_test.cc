// RingView within one process: FIFO order, capacity, free-running counters across 2^32, and the
// Corrupt verdict on an impossible tail (the peer writes the tail in shared memory).
#include "common/ipc/ring.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace hc::ipc {
namespace {

struct Entry {
  uint64_t seq;
  uint64_t check;
};

Entry entryFor(uint64_t seq) { return {seq, ~seq * 0x9e3779b97f4a7c15ull}; }

class LocalRing {
 public:
  explicit LocalRing(uint32_t entries, uint32_t start = 0)
      : slots_(entries),
        head_(start),
        tail_(start),
        ring_(slots_.data(), entries, &head_, &tail_) {}
  RingView<Entry>& ring() { return ring_; }
  std::atomic<uint32_t>& head() { return head_; }
  std::atomic<uint32_t>& tail() { return tail_; }

 private:
  std::vector<Entry> slots_;
  std::atomic<uint32_t> head_;
  std::atomic<uint32_t> tail_;
  RingView<Entry> ring_;
};

TEST(RingViewTest, PopsInPushOrder) {
  LocalRing r(8);
  Entry out{};
  EXPECT_TRUE(r.ring().empty());
  EXPECT_EQ(r.ring().pop(&out), PopResult::Empty);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(r.ring().push(entryFor(i)));
  EXPECT_FALSE(r.ring().empty());
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_EQ(r.ring().pop(&out), PopResult::Ok);
    EXPECT_EQ(out.seq, i);
    EXPECT_EQ(out.check, entryFor(i).check);
  }
  EXPECT_EQ(r.ring().pop(&out), PopResult::Empty);
  EXPECT_TRUE(r.ring().empty());
}

TEST(RingViewTest, RefusesPushWhenFullAndRecoversAfterPop) {
  LocalRing r(4);
  EXPECT_EQ(r.ring().capacity(), 4u);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(r.ring().push(entryFor(i)));
  EXPECT_FALSE(r.ring().push(entryFor(99)));
  EXPECT_EQ(r.tail().load() - r.head().load(), 4u) << "a refused push must not move the tail";
  Entry out{};
  ASSERT_EQ(r.ring().pop(&out), PopResult::Ok);
  EXPECT_EQ(out.seq, 0u);
  EXPECT_TRUE(r.ring().push(entryFor(4)));
  EXPECT_FALSE(r.ring().push(entryFor(5)));
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_EQ(r.ring().pop(&out), PopResult::Ok);
    EXPECT_EQ(out.seq, i);
  }
}

TEST(RingViewTest, OneEntryRingAlternates) {
  LocalRing r(1);
  Entry out{};
  for (uint64_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(r.ring().push(entryFor(i)));
    ASSERT_FALSE(r.ring().push(entryFor(i)));
    ASSERT_EQ(r.ring().pop(&out), PopResult::Ok);
    ASSERT_EQ(out.seq, i);
  }
}

class RingWrapTest : public ::testing::TestWithParam<uint32_t> {};

// Counters are free running: the ring must behave the same when they wrap past UINT32_MAX, both
// in steady flow and while full across the boundary.
TEST_P(RingWrapTest, CountersWrapPast32Bits) {
  const uint32_t start = GetParam();
  LocalRing r(16, start);
  Entry out{};
  uint64_t pushed = 0, popped = 0;
  for (int round = 0; round < 200; ++round) {
    int burst = 1 + round % 16;
    for (int i = 0; i < burst; ++i) {
      if (r.ring().push(entryFor(pushed))) ++pushed;
    }
    int drain = round % 3 == 0 ? 16 : 1 + round % 7;
    for (int i = 0; i < drain; ++i) {
      PopResult pr = r.ring().pop(&out);
      ASSERT_NE(pr, PopResult::Corrupt) << "round " << round;
      if (pr == PopResult::Empty) break;
      ASSERT_EQ(out.seq, popped) << "round " << round;
      ++popped;
    }
    ASSERT_LE(pushed - popped, 16u);
  }
  while (r.ring().pop(&out) == PopResult::Ok) ASSERT_EQ(out.seq, popped++);
  EXPECT_EQ(pushed, popped);
  EXPECT_GT(pushed, 100u);
  // The counters really crossed the boundary for starts near it.
  EXPECT_EQ(r.head().load(), static_cast<uint32_t>(start + popped));
}

TEST_P(RingWrapTest, FullAcrossTheBoundary) {
  const uint32_t start = GetParam();
  LocalRing r(8, start);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(r.ring().push(entryFor(i)));
  EXPECT_FALSE(r.ring().push(entryFor(8)));
  Entry out{};
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_EQ(r.ring().pop(&out), PopResult::Ok);
    EXPECT_EQ(out.seq, i);
  }
  EXPECT_EQ(r.ring().pop(&out), PopResult::Empty);
}
INSTANTIATE_TEST_SUITE_P(NearWrap, RingWrapTest,
                         ::testing::Values(0u, UINT32_MAX - 3, UINT32_MAX - 100, UINT32_MAX,
                                           0x80000000u - 5));

TEST(RingViewTest, ImpossibleTailIsCorrupt) {
  for (uint32_t start : {0u, UINT32_MAX - 2}) {
    LocalRing r(8, start);
    Entry out{};
    // Exactly full is legal.
    r.tail().store(start + 8);
    EXPECT_EQ(r.ring().pop(&out), PopResult::Ok);
    // One past the capacity, far past it, or behind the head (a huge unsigned distance).
    for (uint32_t bad : {9u, 100u, 0x80000000u, UINT32_MAX}) {
      r.head().store(start);
      r.tail().store(start + bad);
      EXPECT_EQ(r.ring().pop(&out), PopResult::Corrupt) << "tail - head = " << bad;
      EXPECT_EQ(r.head().load(), start) << "a Corrupt pop must not consume";
    }
  }
}

TEST(SegmentViewTest, RingsSitWhereTheLayoutSays) {
  constexpr uint32_t kEntries = 64;
  constexpr uint64_t kBytes = 1 << 20;
  std::vector<uint8_t> mem(kBytes + 64);
  // SegmentHeader needs 64-byte alignment.
  void* base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~63ull);
  auto* header = new (base) SegmentHeader{};
  SegmentLayout l = segmentLayout(kBytes, kEntries);
  EXPECT_EQ(l.submitOffset, kHeaderBytes);
  EXPECT_EQ(l.completionOffset % kHeapAlignment, 0u);
  EXPECT_GE(l.completionOffset, l.submitOffset + kEntries * sizeof(SubmitEntry));
  EXPECT_GE(l.heapOffset, l.completionOffset + kEntries * sizeof(CompletionEntry));
  EXPECT_EQ(l.heapOffset + l.heapBytes, kBytes);
  EXPECT_EQ(segmentLayout(1000, kEntries).heapBytes, 0u) << "a too-small segment has no heap";

  SegmentView v = SegmentView::over(base, kBytes, kEntries);
  SubmitEntry s{};
  s.requestId = 42;
  ASSERT_TRUE(v.submit.push(s));
  EXPECT_EQ(header->submitTail.load(), 1u);
  auto* slot = reinterpret_cast<SubmitEntry*>(static_cast<uint8_t*>(base) + l.submitOffset);
  EXPECT_EQ(slot->requestId, 42u);
  CompletionEntry c{};
  c.requestId = 7;
  ASSERT_TRUE(v.completion.push(c));
  EXPECT_EQ(header->completionTail.load(), 1u);
  auto* cslot =
      reinterpret_cast<CompletionEntry*>(static_cast<uint8_t*>(base) + l.completionOffset);
  EXPECT_EQ(cslot->requestId, 7u);
  CompletionEntry out{};
  ASSERT_EQ(v.completion.pop(&out), PopResult::Ok);
  EXPECT_EQ(header->completionHead.load(), 1u);
  header->~SegmentHeader();
}

TEST(FutexTest, WaitTimesOutWhenNobodyWakes) {
  std::atomic<uint32_t> word{5};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(futexWait(&word, 5, 20'000'000));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(15));
}

TEST(FutexTest, WaitReturnsAtOnceWhenTheWordAlreadyChanged) {
  std::atomic<uint32_t> word{6};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(futexWait(&word, 5, 5'000'000'000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

}  // namespace
}  // namespace hc::ipc
