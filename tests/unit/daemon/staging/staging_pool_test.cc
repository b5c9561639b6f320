// StagingPool (daemon/staging/staging_pool.h): what clients declare cannot grow the daemon past
// session.max_staging_bytes, and released buffers give their share back.
#include <gtest/gtest.h>

#include <cstdint>

#include "daemon/staging/staging_pool.h"

namespace hc::staging {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(StagingPoolTest, OneRequestAboveTheCapFailsWithNoResource) {
  StagingPool pool(0, 8 * kMiB);
  auto b = pool.acquire(8 * kMiB + 1);
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), Code::NoResource);
  EXPECT_NE(b.status().message().find("max_staging_bytes"), std::string::npos);
}

TEST(StagingPoolTest, SizesNearTwoToThe64AreRefusedNotRoundedUp) {
  StagingPool pool(0, 8 * kMiB);
  for (uint64_t bytes : {(1ull << 63) + 1, ~0ull}) {
    auto b = pool.acquire(bytes);
    ASSERT_FALSE(b.isOk()) << bytes;
    EXPECT_EQ(b.status().code(), Code::NoResource);
  }
}

TEST(StagingPoolTest, BuffersHeldTogetherStayUnderTheCapAndReleaseGivesItBack) {
  StagingPool pool(16 * kMiB, 8 * kMiB);
  auto a = pool.acquire(4 * kMiB);
  auto b = pool.acquire(3 * kMiB);  // a size class of 4 MiB: the cap is now reached
  ASSERT_TRUE(a.isOk() && b.isOk());
  auto c = pool.acquire(4096);
  ASSERT_FALSE(c.isOk()) << "8 MiB in use of 8";
  EXPECT_EQ(c.status().code(), Code::NoResource);
  pool.release(*a);
  auto d = pool.acquire(4 * kMiB);  // the idle buffer a left, reused
  ASSERT_TRUE(d.isOk()) << d.status().message();
  pool.release(*b);
  pool.release(*d);
  auto e = pool.acquire(8 * kMiB);
  EXPECT_TRUE(e.isOk()) << e.status().message();
  if (e.isOk()) pool.release(*e);
}

}  // namespace
}  // namespace hc::staging
