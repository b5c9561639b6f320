// SegmentAllocator: alignment, first fit, coalescing, exhaustion, double free, contains() with
// client-chosen values near UINT64_MAX, and a random sequence checked against a simple model.
#include "daemon/session/segment_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace hc::session {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kHeap = 8192;  // a typical heap offset: after the header and the rings

uint64_t mustAllocate(SegmentAllocator& a, uint64_t bytes) {
  auto r = a.allocate(bytes);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r.value() : UINT64_MAX;
}

TEST(SegmentAllocatorTest, RoundsUpAndFillsFirstFit) {
  SegmentAllocator a(kHeap, 16 * kPage);
  EXPECT_EQ(a.largestFree(), 16 * kPage);
  EXPECT_EQ(mustAllocate(a, 1), kHeap);
  EXPECT_EQ(a.sizeAt(kHeap), kPage);
  EXPECT_EQ(mustAllocate(a, kPage + 1), kHeap + kPage);
  EXPECT_EQ(a.sizeAt(kHeap + kPage), 2 * kPage);
  EXPECT_EQ(mustAllocate(a, kPage), kHeap + 3 * kPage);
  EXPECT_EQ(a.bytesInUse(), 4 * kPage);
  EXPECT_EQ(a.liveCount(), 3u);
  EXPECT_EQ(a.largestFree(), 12 * kPage);
  EXPECT_EQ(a.sizeAt(kHeap + 1), 0u);  // not the start of an allocation
  // A hole at the front is reused first.
  ASSERT_TRUE(a.free(kHeap).isOk());
  EXPECT_EQ(mustAllocate(a, 100), kHeap);
}

TEST(SegmentAllocatorTest, ShrinksAnUnalignedHeapInwards) {
  SegmentAllocator a(kHeap + 10, 3 * kPage);
  EXPECT_EQ(a.largestFree(), 2 * kPage);
  EXPECT_EQ(mustAllocate(a, 1), kHeap + kPage);
  SegmentAllocator tiny(kHeap + 1, kPage);
  EXPECT_EQ(tiny.largestFree(), 0u);
  EXPECT_EQ(tiny.allocate(1).status().code(), Code::NoResource);
}

TEST(SegmentAllocatorTest, FreeCoalescesBothNeighbours) {
  SegmentAllocator a(kHeap, 4 * kPage);
  const uint64_t x = mustAllocate(a, kPage);
  const uint64_t y = mustAllocate(a, kPage);
  const uint64_t z = mustAllocate(a, kPage);
  ASSERT_TRUE(a.free(x).isOk());
  ASSERT_TRUE(a.free(z).isOk());  // merges with the free tail
  EXPECT_EQ(a.largestFree(), 2 * kPage);
  ASSERT_TRUE(a.free(y).isOk());  // merges with both
  EXPECT_EQ(a.largestFree(), 4 * kPage);
  EXPECT_EQ(a.bytesInUse(), 0u);
  EXPECT_EQ(a.liveCount(), 0u);
  EXPECT_EQ(mustAllocate(a, 4 * kPage), kHeap);
}

TEST(SegmentAllocatorTest, ExhaustionIsNoResourceAndSaysWhy) {
  SegmentAllocator a(kHeap, 4 * kPage);
  const uint64_t x = mustAllocate(a, kPage);
  mustAllocate(a, kPage);
  ASSERT_TRUE(a.free(x).isOk());  // free: 1 page, then 2 pages
  auto r = a.allocate(3 * kPage);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::NoResource);
  EXPECT_NE(r.status().message().find(std::to_string(3 * kPage)), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(std::to_string(2 * kPage)), std::string::npos)
      << r.status().message();
  // Sizes that overflow when rounded up are refused, not wrapped to a small block.
  EXPECT_EQ(a.allocate(UINT64_MAX).status().code(), Code::NoResource);
  EXPECT_EQ(a.allocate(UINT64_MAX - 10).status().code(), Code::NoResource);
  EXPECT_EQ(a.allocate(0).status().code(), Code::InvalidArgument);
  EXPECT_EQ(mustAllocate(a, 2 * kPage), kHeap + 2 * kPage);
  EXPECT_EQ(a.allocate(kPage + 1).status().code(), Code::NoResource);  // 1 page free, in front
  EXPECT_EQ(mustAllocate(a, kPage), kHeap);
  EXPECT_EQ(a.allocate(1).status().code(), Code::NoResource);
  EXPECT_EQ(a.largestFree(), 0u);
}

TEST(SegmentAllocatorTest, FreeOfAnythingButALiveStartIsNotFound) {
  SegmentAllocator a(kHeap, 4 * kPage);
  const uint64_t x = mustAllocate(a, 2 * kPage);
  EXPECT_EQ(a.free(x + 1).code(), Code::NotFound);
  EXPECT_EQ(a.free(x + kPage).code(), Code::NotFound);
  EXPECT_EQ(a.free(0).code(), Code::NotFound);
  EXPECT_EQ(a.free(UINT64_MAX).code(), Code::NotFound);
  ASSERT_TRUE(a.free(x).isOk());
  Status again = a.free(x);
  EXPECT_EQ(again.code(), Code::NotFound);
  EXPECT_EQ(a.largestFree(), 4 * kPage);  // the double free changed nothing
}

TEST(SegmentAllocatorTest, ContainsOnlyRangesInsideOneLiveAllocation) {
  SegmentAllocator a(kHeap, 8 * kPage);
  const uint64_t x = mustAllocate(a, kPage);
  const uint64_t y = mustAllocate(a, 2 * kPage);
  EXPECT_TRUE(a.contains(x, kPage));
  EXPECT_TRUE(a.contains(x + 10, kPage - 10));
  EXPECT_FALSE(a.contains(x + 10, kPage - 9));
  EXPECT_FALSE(a.contains(x, kPage + 1));  // runs into y: adjacent allocations do not join
  EXPECT_TRUE(a.contains(y, 2 * kPage));
  EXPECT_FALSE(a.contains(kHeap - 1, 1));
  EXPECT_FALSE(a.contains(y + 2 * kPage, 1));  // free space
  // Empty ranges: inside, or at the very end of, an allocation.
  EXPECT_TRUE(a.contains(x + kPage, 0));
  EXPECT_TRUE(a.contains(y + 2 * kPage, 0));
  EXPECT_FALSE(a.contains(y + 2 * kPage + 1, 0));
  EXPECT_FALSE(a.contains(0, 0));
  // offset + bytes wraps around: never inside.
  EXPECT_FALSE(a.contains(x, UINT64_MAX));
  EXPECT_FALSE(a.contains(x + 1, UINT64_MAX - x));
  EXPECT_FALSE(a.contains(y + kPage, UINT64_MAX - (y + kPage) + 2));
  EXPECT_FALSE(a.contains(UINT64_MAX, 1));
  EXPECT_FALSE(a.contains(UINT64_MAX, 0));
  EXPECT_FALSE(a.contains(UINT64_MAX - kPage, 2 * kPage));
  ASSERT_TRUE(a.free(x).isOk());
  EXPECT_FALSE(a.contains(x, 1));
}

TEST(SegmentAllocatorTest, HeapAtTheTopOfTheAddressRange) {
  const uint64_t top = UINT64_MAX - UINT64_MAX % kPage;  // last page boundary
  SegmentAllocator a(top - 4 * kPage, 4 * kPage);
  const uint64_t x = mustAllocate(a, 4 * kPage);
  EXPECT_EQ(x, top - 4 * kPage);
  EXPECT_TRUE(a.contains(x, 4 * kPage));
  EXPECT_TRUE(a.contains(top, 0));
  EXPECT_FALSE(a.contains(top - 1, 2));
  EXPECT_FALSE(a.contains(x + 1, UINT64_MAX));
}

// A random sequence checked step by step against a page-granular bitmap model.
TEST(SegmentAllocatorTest, RandomSequenceMatchesModel) {
  constexpr uint64_t kPages = 256;
  SegmentAllocator a(kHeap, kPages * kPage);
  std::vector<bool> used(kPages, false);
  std::map<uint64_t, uint64_t> live;  // offset -> pages
  std::mt19937_64 rng(7);
  auto firstFit = [&](uint64_t pages) -> int64_t {
    for (uint64_t p = 0; p + pages <= kPages; ++p) {
      uint64_t q = p;
      while (q < p + pages && !used[q]) ++q;
      if (q == p + pages) return static_cast<int64_t>(p);
      p = q;
    }
    return -1;
  };
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t bytes = 1 + rng() % (12 * kPage);
      const uint64_t pages = (bytes + kPage - 1) / kPage;
      const int64_t want = firstFit(pages);
      auto r = a.allocate(bytes);
      ASSERT_EQ(r.isOk(), want >= 0) << "step " << step;
      if (want < 0) {
        EXPECT_EQ(r.status().code(), Code::NoResource);
        continue;
      }
      ASSERT_EQ(r.value(), kHeap + static_cast<uint64_t>(want) * kPage) << "step " << step;
      for (uint64_t p = 0; p < pages; ++p) used[want + p] = true;
      live[r.value()] = pages;
    } else {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(a.free(it->first).isOk());
      const uint64_t first = (it->first - kHeap) / kPage;
      for (uint64_t p = 0; p < it->second; ++p) used[first + p] = false;
      live.erase(it);
    }
    uint64_t inUse = 0, largest = 0, run = 0;
    for (bool u : used) {
      inUse += u;
      run = u ? 0 : run + 1;
      largest = std::max(largest, run);
    }
    ASSERT_EQ(a.bytesInUse(), inUse * kPage);
    ASSERT_EQ(a.largestFree(), largest * kPage);
    ASSERT_EQ(a.liveCount(), live.size());
    for (const auto& [offset, pages] : live) {
      ASSERT_EQ(a.sizeAt(offset), pages * kPage);
      ASSERT_TRUE(a.contains(offset + 1, pages * kPage - 1));
    }
  }
}

}  // namespace
}  // namespace hc::session
