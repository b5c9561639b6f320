// DeviceRegionCache (client/src/device_cache.h): when a registered device region may leave the
// daemon. A region in use by an operation between deviceRef and its completion, or pinned by a
// registration, is never handed out for unregistering; freed allocations and addresses reused
// by another allocation are.
#include "client/src/device_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace hc::client {
namespace {

using Regions = std::vector<uint32_t>;
constexpr uint64_t kMiB = 1 << 20;

// Registers (runtime "sim", allocation id, base) as region `region` and ends its first use.
void addIdle(DeviceRegionCache& c, uint64_t id, uintptr_t base, uint64_t bytes, uint32_t region) {
  c.insert("sim", id, base, bytes, region);
  c.release(region);
}

TEST(DeviceRegionCacheTest, ReusedRegionCountsNoNewImport) {
  DeviceRegionCache c;
  EXPECT_FALSE(c.acquire("sim", 7).has_value());
  c.insert("sim", 7, 0x1000, kMiB, 3);
  c.release(3);
  ASSERT_EQ(c.acquire("sim", 7), 3u);
  EXPECT_FALSE(c.acquire("cuda", 7).has_value());  // another runtime's id 7 is another allocation
  EXPECT_EQ(c.bytes(), kMiB);
  EXPECT_TRUE(c.takeDoomed().empty());
}

TEST(DeviceRegionCacheTest, AnotherAllocationAtTheSameBaseDropsTheOldRegion) {
  DeviceRegionCache c;
  addIdle(c, 1, 0x1000, kMiB, 10);
  c.claimBase("sim", 0x1000, 1);  // the same allocation: nothing changes
  EXPECT_TRUE(c.takeDoomed().empty());
  c.claimBase("sim", 0x1000, 2);  // freed behind the client's back, the address reused
  EXPECT_EQ(c.takeDoomed(), Regions{10});
  EXPECT_FALSE(c.acquire("sim", 1).has_value());
  EXPECT_EQ(c.bytes(), 0u);
}

TEST(DeviceRegionCacheTest, ForgottenRegionInUseIsUnregisteredWhenItsLastUseEnds) {
  DeviceRegionCache c;
  c.insert("sim", 1, 0x1000, kMiB, 10);  // one use
  ASSERT_EQ(c.acquire("sim", 1), 10u);   // two
  c.forget("sim", 1);
  EXPECT_TRUE(c.takeDoomed().empty());
  EXPECT_FALSE(c.acquire("sim", 1).has_value());  // out of the lookup at once
  c.release(10);
  EXPECT_TRUE(c.takeDoomed().empty());
  c.release(10);
  EXPECT_EQ(c.takeDoomed(), Regions{10});
  c.release(10);  // a stray release of a region gone is ignored
  EXPECT_TRUE(c.takeDoomed().empty());
}

TEST(DeviceRegionCacheTest, EvictionTakesLeastRecentlyUsedIdleUnpinnedRegions) {
  DeviceRegionCache c;
  addIdle(c, 1, 0x10000, kMiB, 1);
  addIdle(c, 2, 0x20000, kMiB, 2);
  addIdle(c, 3, 0x30000, kMiB, 3);
  addIdle(c, 4, 0x40000, kMiB, 4);
  ASSERT_EQ(c.acquire("sim", 1), 1u);  // 1 becomes the most recent, and is in use
  c.release(1);
  ASSERT_EQ(c.acquire("sim", 2), 2u);  // 2 in use
  ASSERT_TRUE(c.pin("sim", 3));        // 3 pinned
  c.evictFor(kMiB, 3 * kMiB);          // must drop 2 MiB: 4, then 1 (2 in use, 3 pinned)
  EXPECT_EQ(c.takeDoomed(), (Regions{4, 1}));
  EXPECT_EQ(c.bytes(), 2 * kMiB);
  c.evictFor(kMiB, kMiB);  // nothing left that may go
  EXPECT_TRUE(c.takeDoomed().empty());
  c.unpin("sim", 3);
  c.evictIdle();
  EXPECT_EQ(c.takeDoomed(), Regions{3});
  c.release(2);
  c.evictFor(0, 0);  // cap 0: no cap
  EXPECT_TRUE(c.takeDoomed().empty());
  c.evictIdle();
  EXPECT_EQ(c.takeDoomed(), Regions{2});
  EXPECT_EQ(c.size(), 0u);
}

TEST(DeviceRegionCacheTest, PinNeedsARegisteredAllocation) {
  DeviceRegionCache c;
  EXPECT_FALSE(c.pin("sim", 9));
  addIdle(c, 9, 0x1000, kMiB, 5);
  EXPECT_TRUE(c.pin("sim", 9));
  c.evictIdle();
  EXPECT_TRUE(c.takeDoomed().empty());
  c.forget("sim", 9);  // freeing pinned memory still releases it
  EXPECT_EQ(c.takeDoomed(), Regions{5});
}

TEST(DeviceRegionCacheTest, ARacingSecondRegistrationReplacesTheFirst) {
  DeviceRegionCache c;
  c.insert("sim", 1, 0x1000, kMiB, 10);  // thread A's use
  c.insert("sim", 1, 0x1000, kMiB, 11);  // thread B registered the same allocation meanwhile
  EXPECT_EQ(c.bytes(), kMiB);
  EXPECT_TRUE(c.takeDoomed().empty());  // A's region is still named by A's entry
  c.release(10);
  EXPECT_EQ(c.takeDoomed(), Regions{10});
  EXPECT_EQ(c.acquire("sim", 1), 11u);
}

}  // namespace
}  // namespace hc::client
