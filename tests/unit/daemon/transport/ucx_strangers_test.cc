// UCX backend, pure parts of what strangers may cost (ucx_strangers.h): the bounded table of
// pending hellos and the rate of refusal logs.
#include <gtest/gtest.h>

#include <chrono>

#include "daemon/transport/ucx/ucx_strangers.h"

namespace hc::transport::ucx {
namespace {

TEST(PendingHellosTest, KeepsTheFirstHelloOfAnEndpoint) {
  PendingHellos hellos(4);
  EXPECT_EQ(hellos.add(0xa, 1), PendingHellos::Added::New);
  EXPECT_EQ(hellos.add(0xa, 2), PendingHellos::Added::Repeated);
  EXPECT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos.take(0xa), PeerId{1});
  EXPECT_EQ(hellos.take(0xa), std::nullopt);
  EXPECT_EQ(hellos.size(), 0u);
}

TEST(PendingHellosTest, DropsTheOldestBeyondItsCapacity) {
  PendingHellos hellos(3);
  for (uint64_t uuid = 1; uuid <= 3; ++uuid) {
    EXPECT_EQ(hellos.add(uuid, static_cast<PeerId>(uuid)), PendingHellos::Added::New);
  }
  EXPECT_EQ(hellos.take(2), PeerId{2});  // taken: no longer counts, nor ages
  EXPECT_EQ(hellos.add(4, 4), PendingHellos::Added::New);
  EXPECT_EQ(hellos.add(5, 5), PendingHellos::Added::NewEvicting);  // drops 1, the oldest
  EXPECT_EQ(hellos.size(), 3u);
  EXPECT_EQ(hellos.take(1), std::nullopt);
  for (int round = 0; round < 1000; ++round) {
    (void)hellos.add(100 + static_cast<uint64_t>(round), 7);
  }
  EXPECT_EQ(hellos.size(), 3u);
  EXPECT_EQ(hellos.take(1099), PeerId{7});  // the newest survive
  EXPECT_EQ(hellos.take(5), std::nullopt);
}

TEST(RefusalCounterTest, LogsTheFirstThenAtMostOncePerInterval) {
  RefusalCounter counter;
  const auto t0 = RefusalCounter::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(counter.count(t0));
  EXPECT_EQ(counter.unlogged(), 0u);
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(counter.count(t0 + std::chrono::seconds(1)));
  EXPECT_TRUE(counter.count(t0 + RefusalCounter::kLogInterval));
  EXPECT_EQ(counter.unlogged(), 999u);  // reported with the next logged one
  EXPECT_FALSE(counter.count(t0 + RefusalCounter::kLogInterval + std::chrono::seconds(1)));
  EXPECT_EQ(counter.total(), 1002u);
}

}  // namespace
}  // namespace hc::transport::ucx
