// HealthBoard: statuses per service name, watchers told of changes only, the drain, close.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "daemon/control/health_board.h"

namespace hc::control {
namespace {

class RecordingWatcher final : public HealthWatcher {
 public:
  void onStatus(ServingStatus status) override { seen.push_back(status); }
  void onClose() override { closed = true; }
  std::vector<ServingStatus> seen;
  bool closed = false;
};

TEST(HealthBoardTest, UnsetNameIsUnknown) {
  HealthBoard board;
  EXPECT_FALSE(board.get("").has_value());
  board.set("", ServingStatus::Serving);
  EXPECT_EQ(board.get(""), ServingStatus::Serving);
  EXPECT_FALSE(board.get("hetero_comm.v1.Nope").has_value());
}

TEST(HealthBoardTest, SubscribeReturnsTheCurrentStatusOrServiceUnknown) {
  HealthBoard board;
  board.set(kCollectivesHealthName, ServingStatus::NotServing);
  RecordingWatcher a, b;
  EXPECT_EQ(board.subscribe(kCollectivesHealthName, &a), ServingStatus::NotServing);
  EXPECT_EQ(board.subscribe("other", &b), ServingStatus::ServiceUnknown);
  EXPECT_EQ(board.watcherCount(), 2u);
  board.unsubscribe(&a);
  board.unsubscribe(&b);
  EXPECT_EQ(board.watcherCount(), 0u);
}

TEST(HealthBoardTest, WatchersHearChangesOfTheirNameOnly) {
  HealthBoard board;
  board.set(kCollectivesHealthName, ServingStatus::NotServing);
  board.set(kPeersHealthName, ServingStatus::Serving);
  RecordingWatcher collectives, later;
  ASSERT_TRUE(board.subscribe(kCollectivesHealthName, &collectives));
  ASSERT_TRUE(board.subscribe("hetero_comm.v1.Later", &later));
  board.set(kCollectivesHealthName, ServingStatus::Serving);
  board.set(kCollectivesHealthName, ServingStatus::Serving);  // no change: nobody told
  board.set(kPeersHealthName, ServingStatus::NotServing);
  board.set("hetero_comm.v1.Later", ServingStatus::Serving);  // a name that appears later
  EXPECT_EQ(collectives.seen, std::vector<ServingStatus>{ServingStatus::Serving});
  EXPECT_EQ(later.seen, std::vector<ServingStatus>{ServingStatus::Serving});
  board.unsubscribe(&collectives);
  board.unsubscribe(&later);
}

TEST(HealthBoardTest, DrainTurnsEveryNameNotServing) {
  HealthBoard board;
  board.set(kDaemonHealthName, ServingStatus::Serving);
  board.set(kCollectivesHealthName, ServingStatus::Serving);
  board.set(kPeersHealthName, ServingStatus::NotServing);
  RecordingWatcher daemon, peers;
  ASSERT_TRUE(board.subscribe(kDaemonHealthName, &daemon));
  ASSERT_TRUE(board.subscribe(kPeersHealthName, &peers));
  board.setAllNotServing();
  EXPECT_EQ(board.get(kDaemonHealthName), ServingStatus::NotServing);
  EXPECT_EQ(board.get(kCollectivesHealthName), ServingStatus::NotServing);
  EXPECT_EQ(daemon.seen, std::vector<ServingStatus>{ServingStatus::NotServing});
  EXPECT_TRUE(peers.seen.empty()) << "already NOT_SERVING: no change to report";
  board.unsubscribe(&daemon);
  board.unsubscribe(&peers);
}

TEST(HealthBoardTest, CloseTellsWatchersAndRefusesNewOnes) {
  HealthBoard board;
  board.set("", ServingStatus::Serving);
  RecordingWatcher w, late;
  ASSERT_TRUE(board.subscribe("", &w));
  board.close();
  board.close();  // idempotent
  EXPECT_TRUE(w.closed);
  EXPECT_FALSE(board.subscribe("", &late).has_value());
  board.set("", ServingStatus::NotServing);  // ignored once closed
  EXPECT_TRUE(w.seen.empty());
  board.unsubscribe(&w);
}

// The IPC thread writes while gRPC threads read and come and go (run under TSan to mean more).
TEST(HealthBoardTest, ConcurrentWritersReadersAndWatchers) {
  HealthBoard board;
  // Known before the reader starts: get() is empty only for a name never set.
  board.set(kCollectivesHealthName, ServingStatus::NotServing);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 20000; ++i) {
      board.set(kCollectivesHealthName,
                i % 2 ? ServingStatus::Serving : ServingStatus::NotServing);
    }
    stop = true;
  });
  std::thread reader([&] {
    while (!stop) ASSERT_TRUE(board.get(kCollectivesHealthName).has_value());
  });
  std::thread watcher([&] {
    while (!stop) {
      RecordingWatcher w;
      if (board.subscribe(kCollectivesHealthName, &w)) board.unsubscribe(&w);
    }
  });
  writer.join();
  reader.join();
  watcher.join();
  EXPECT_EQ(board.get(kCollectivesHealthName), ServingStatus::Serving);
  EXPECT_EQ(board.watcherCount(), 0u);
}

}  // namespace
}  // namespace hc::control
