// SmallArea: the daemon's side of a communicator's small-operation area: the sealed memfd's
// layout as the ranks find it, its failure (first reason kept, waiters woken) and the counters
// it adds to the flight record's progress, read from memory the ranks may scribble on.
#include "daemon/session/small_area.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "common/ipc/ring.h"

namespace hc::session {
namespace {

// The area as a rank maps it: through the fd, not the daemon's own mapping.
struct RankMapping {
  explicit RankMapping(const SmallArea& area) : bytes(area.bytes()) {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, area.fd(), 0);
    view.base = static_cast<uint8_t*>(base);
    view.nranks = area.nranks();
  }
  ~RankMapping() { ::munmap(base, bytes); }
  size_t bytes;
  void* base;
  ipc::AreaView view;
};

TEST(SmallAreaTest, RanksFindTheLayoutTheProtocolNames) {
  auto area = SmallArea::create(3, "small-area-test");
  ASSERT_TRUE(area.isOk()) << area.status().toString();
  EXPECT_EQ((*area)->bytes(), ipc::areaBytes(3));
  RankMapping rank(**area);
  ASSERT_NE(rank.base, MAP_FAILED);
  const ipc::AreaHeader* h = rank.view.header();
  EXPECT_EQ(h->magic, ipc::kAreaMagic);
  EXPECT_EQ(h->nranks, 3u);
  EXPECT_EQ(h->depth, ipc::kAreaDepth);
  EXPECT_EQ(h->slotBytes, ipc::kAreaSlotBytes);
  EXPECT_EQ(h->failed.load(), 0u);
  // The last slot's data ends at the end of the area.
  const uint8_t* end = rank.view.data(ipc::kAreaDepth - 1, 2) + ipc::kAreaSlotBytes;
  EXPECT_EQ(end, rank.view.base + (*area)->bytes());
}

TEST(SmallAreaTest, NoRankCanResizeIt) {
  auto area = SmallArea::create(2, "small-area-test");
  ASSERT_TRUE(area.isOk());
  const int seals = ::fcntl((*area)->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(::ftruncate((*area)->fd(), 0), 0);
  EXPECT_NE(::ftruncate((*area)->fd(), static_cast<off_t>((*area)->bytes() * 2)), 0);
}

TEST(SmallAreaTest, RefusesSizesWithoutAnArea) {
  EXPECT_FALSE(SmallArea::create(0, "small-area-test").isOk());
  EXPECT_FALSE(SmallArea::create(ipc::kAreaMaxRanks + 1, "small-area-test").isOk());
}

TEST(SmallAreaTest, FailureKeepsTheFirstReasonAndWakesASleepingRank) {
  auto area = SmallArea::create(2, "small-area-test");
  ASSERT_TRUE(area.isOk());
  RankMapping rank(**area);
  ipc::AreaHeader* h = rank.view.header();
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    h->sleepers.fetch_add(1);
    const uint32_t seen = h->event.load();
    while (h->failed.load(std::memory_order_acquire) == 0) ipc::futexWait(&h->event, seen, -1);
    woke = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*area)->fail(Status{Code::Unavailable, "rank 1's client died"});
  (*area)->fail(Status{Code::Timeout, "a later reason"});
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(h->failed.load(), ipc::kAreaFailedByDaemon);
  EXPECT_EQ(h->code, static_cast<int32_t>(Code::Unavailable));
  EXPECT_STREQ(h->reason, "rank 1's client died");
}

TEST(SmallAreaTest, LongReasonsAreCutAndStayTerminated) {
  auto area = SmallArea::create(2, "small-area-test");
  ASSERT_TRUE(area.isOk());
  RankMapping rank(**area);
  (*area)->fail(Status{Code::Unavailable, std::string(1000, 'x')});
  const ipc::AreaHeader* h = rank.view.header();
  EXPECT_EQ(std::string(h->reason).size(), sizeof(h->reason) - 1);
}

TEST(SmallAreaTest, AddsEachRanksSmallOpsToItsProgress) {
  auto area = SmallArea::create(2, "small-area-test");
  ASSERT_TRUE(area.isOk());
  RankMapping rank(**area);
  rank.view.line(0)->smallIssued = 5;
  rank.view.line(0)->smallDone = 4;
  rank.view.line(1)->smallIssued = 4;
  rank.view.line(1)->smallDone = 4;
  std::vector<observe::RankProgress> ranks(3);
  ranks[0].rank = 0;
  ranks[0].collectivesPosted = 2;
  ranks[0].collectivesFinished = 2;
  ranks[1].rank = 1;
  ranks[1].collectivesPosted = 2;
  ranks[1].collectivesFinished = 2;
  ranks[2].rank = 7;  // not a rank of the area: left alone
  (*area)->addProgress(&ranks);
  EXPECT_EQ(ranks[0].collectivesPosted, 7u);
  EXPECT_EQ(ranks[0].collectivesFinished, 6u);
  EXPECT_EQ(ranks[1].collectivesPosted, 6u);
  EXPECT_EQ(ranks[1].collectivesFinished, 6u);
  EXPECT_EQ(ranks[2].collectivesPosted, 0u);
}

}  // namespace
}  // namespace hc::session
