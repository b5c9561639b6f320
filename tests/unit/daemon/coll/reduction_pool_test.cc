// ReductionPool: every part runs exactly once and `done` once after all of them, on many jobs
// submitted from many threads, with parts of one job running at once; the inline 0-thread mode;
// and a destructor that drops no queued job. Waits are bounded so that a bug fails, not hangs.
#include "daemon/coll/reduction_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace hc::coll {
namespace {

constexpr auto kPatience = std::chrono::seconds(60);

// A count that tests wait on.
class Counter {
 public:
  void add() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++n_;
    cv_.notify_all();
  }
  bool waitFor(size_t target) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kPatience, [&] { return n_ >= target; });
  }
  size_t value() {
    std::lock_guard<std::mutex> lock(mutex_);
    return n_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t n_ = 0;
};

// One job's bookkeeping: which parts ran how often, checked by done().
struct JobRecord {
  explicit JobRecord(size_t parts) : runs(parts) {}
  std::vector<std::atomic<int>> runs;
  std::vector<uint64_t> results = std::vector<uint64_t>(runs.size());  // plain writes, by parts
  std::atomic<int> dones{0};
  bool allRanOnceAtDone = false;
};

void submitRecorded(ReductionPool& pool, const std::shared_ptr<JobRecord>& job, Counter& done) {
  pool.submit(
      job->runs.size(),
      [job](size_t part) {
        job->runs[part].fetch_add(1);
        job->results[part] = part * part + 1;
      },
      [job, &done] {
        bool ok = true;
        for (size_t p = 0; p < job->runs.size(); ++p) {
          // The plain writes of every part must be visible here.
          ok = ok && job->runs[p].load() == 1 && job->results[p] == p * p + 1;
        }
        job->allRanOnceAtDone = ok;
        job->dones.fetch_add(1);
        done.add();
      });
}

void expectRanExactlyOnce(const JobRecord& job) {
  EXPECT_TRUE(job.allRanOnceAtDone);
  EXPECT_EQ(job.dones.load(), 1);
  for (const auto& r : job.runs) EXPECT_EQ(r.load(), 1);
}

TEST(ReductionPoolTest, RunsEveryPartOnceThenDoneOnce) {
  ReductionPool pool(2);
  EXPECT_EQ(pool.threads(), 2u);
  Counter done;
  auto job = std::make_shared<JobRecord>(1000);
  submitRecorded(pool, job, done);
  ASSERT_TRUE(done.waitFor(1));
  expectRanExactlyOnce(*job);
}

TEST(ReductionPoolTest, ManyConcurrentJobsFromManyThreads) {
  constexpr int kSubmitters = 4;
  constexpr int kJobsEach = 200;
  ReductionPool pool(3);
  Counter done;
  std::vector<std::vector<std::shared_ptr<JobRecord>>> jobs(kSubmitters);
  std::vector<std::thread> submitters;
  for (int t = 0; t < kSubmitters; ++t) {
    submitters.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int j = 0; j < kJobsEach; ++j) {
        jobs[t].push_back(std::make_shared<JobRecord>(rng() % 17));  // includes 0 parts
        submitRecorded(pool, jobs[t].back(), done);
      }
    });
  }
  for (auto& t : submitters) t.join();
  ASSERT_TRUE(done.waitFor(kSubmitters * kJobsEach));
  for (const auto& list : jobs) {
    for (const auto& job : list) expectRanExactlyOnce(*job);
  }
}

TEST(ReductionPoolTest, PartsOfOneJobRunAtOnce) {
  ReductionPool pool(2);
  std::mutex mutex;
  std::condition_variable cv;
  int started = 0;
  std::atomic<int> sawBoth{0};
  Counter done;
  // Each part waits for the other to start: only possible if two workers run them together.
  pool.submit(
      2,
      [&](size_t) {
        std::unique_lock<std::mutex> lock(mutex);
        ++started;
        cv.notify_all();
        if (cv.wait_for(lock, kPatience, [&] { return started == 2; })) sawBoth.fetch_add(1);
      },
      [&] { done.add(); });
  ASSERT_TRUE(done.waitFor(1));
  EXPECT_EQ(sawBoth.load(), 2);
}

TEST(ReductionPoolTest, ZeroThreadsRunsInlineInOrder) {
  ReductionPool pool(0);
  EXPECT_EQ(pool.threads(), 0u);
  const auto caller = std::this_thread::get_id();
  std::vector<size_t> order;
  bool done = false;
  pool.submit(
      5,
      [&](size_t part) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        order.push_back(part);
      },
      [&] {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        done = true;
      });
  EXPECT_TRUE(done);  // before submit() returned
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(ReductionPoolTest, ZeroPartsCallsDoneInline) {
  ReductionPool pool(2);
  bool done = false;
  pool.submit(
      0, [](size_t) { ADD_FAILURE() << "no part to run"; }, [&] { done = true; });
  EXPECT_TRUE(done);
}

TEST(ReductionPoolTest, DestructorRunsEveryQueuedJob) {
  Counter done;
  std::vector<std::shared_ptr<JobRecord>> jobs;
  std::mutex gateMutex;
  std::condition_variable gateCv;
  bool open = false;
  {
    ReductionPool pool(1);
    // The first job holds the only worker, so the others are still queued when the pool goes.
    pool.submit(
        1,
        [&](size_t) {
          std::unique_lock<std::mutex> lock(gateMutex);
          gateCv.wait_for(lock, kPatience, [&] { return open; });
        },
        [&] { done.add(); });
    for (int j = 0; j < 100; ++j) {
      jobs.push_back(std::make_shared<JobRecord>(10));
      submitRecorded(pool, jobs.back(), done);
    }
    {
      std::lock_guard<std::mutex> lock(gateMutex);
      open = true;
    }
    gateCv.notify_all();
  }
  EXPECT_EQ(done.value(), 101u);
  for (const auto& job : jobs) expectRanExactlyOnce(*job);
}

// The watchdog's view: an idle worker is never stuck, one held inside a part is, by name, and
// it turns again once the part returns.
TEST(ReductionPoolTest, AWorkerHeldInsideAPartShowsAsStuckAndIdleWorkersDoNot) {
  HeartbeatBoard board;
  ReductionPool pool(2, &board);
  const auto limit = std::chrono::milliseconds(50);
  std::this_thread::sleep_for(limit * 3);
  EXPECT_EQ(board.stuck(limit), "") << "idle workers sleep; they are not stuck";

  std::mutex gateMutex;
  std::condition_variable gateCv;
  bool open = false;
  std::atomic<bool> finished{false};
  pool.submit(
      1,
      [&](size_t) {
        std::unique_lock<std::mutex> lock(gateMutex);
        gateCv.wait_for(lock, std::chrono::seconds(10), [&] { return open; });
      },
      [&] { finished = true; });
  std::string stuck;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stuck.empty() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stuck = board.stuck(limit);
  }
  EXPECT_EQ(stuck.rfind("hc-reduce-", 0), 0u) << stuck;
  EXPECT_NE(stuck.find("silent for"), std::string::npos) << stuck;
  {
    std::lock_guard<std::mutex> lock(gateMutex);
    open = true;
  }
  gateCv.notify_all();
  while (!finished && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(finished);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(board.stuck(limit), "");
}

TEST(HeartbeatTest, SilenceCountsOnlyWhileAwakeAndDroppedBeatsAreForgotten) {
  HeartbeatBoard board;
  auto beat = board.add("loop");
  const auto now = Heartbeat::Clock::now();
  EXPECT_EQ(board.stuck(std::chrono::seconds(1), now), "");
  EXPECT_EQ(board.stuck(std::chrono::seconds(1), now + std::chrono::seconds(2)).rfind("loop (silent for ", 0), 0u);
  beat->sleeping(true);
  EXPECT_EQ(board.stuck(std::chrono::seconds(1), now + std::chrono::seconds(2)), "");
  beat->sleeping(false);
  EXPECT_NE(board.stuck(std::chrono::seconds(1), now + std::chrono::seconds(5)), "");
  beat.reset();
  EXPECT_EQ(board.stuck(std::chrono::seconds(1), now + std::chrono::seconds(5)), "");
}

}  // namespace
}  // namespace hc::coll
