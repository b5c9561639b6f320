// A client that floods the daemon's IPC thread with frames (CommAbort of a handle it does not
// hold, from two threads) must delay only itself: an honest client's allreduces, timed before and
// during the flood, keep their latency. Runs alone (hc_fault_test is RUN_SERIAL): its bound is on
// time, and the other tests' load would be measured with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/ipc/frames.h"
#include "tests/integration/bad_entry_fixture.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::duration<double, std::micro>;

// Latencies of n allreduces of 1024 int32 by the fixture's client, sorted.
std::vector<double> timeAllreduces(RawClient& client, uint64_t comm, uint64_t send, uint64_t recv,
                                   int n) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    auto c = client.call(makeEntry(ipc::OpType::AllReduce, comm, kInt32, kSum, 1024, send, recv));
    const double took = Micros(Clock::now() - start).count();
    if (!c.isOk() || c->status != 0) {
      ADD_FAILURE() << "allreduce " << i << ": "
                    << (c.isOk() ? completionText(*c) : c.status().toString());
      break;
    }
    us.push_back(took);
  }
  std::sort(us.begin(), us.end());
  return us;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

// The bound: p99 during the flood within 5x the p99 before it (or 5 ms, whichever is larger: on
// two cores the flooding threads take CPU time from the honest client itself, which no daemon can
// give back), and no single operation above 100 ms. Measured here: p99 0.3 ms before, 1.1-1.8 ms
// during the flood; without the per-turn budget the daemon stayed inside one client's frames for
// as long as they kept coming (p99 6.7-14.6 ms during the flood in three runs).
TEST_F(BadInputEntryTest, FrameFloodFromTwoThreadsLeavesOtherClientsLatency) {
  constexpr int kOps = 300;
  const auto before = timeAllreduces(*client_, comm_, a_.offset, b_.offset, kOps);
  ASSERT_EQ(before.size(), static_cast<size_t>(kOps));

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{0};
  std::vector<std::thread> flooders;
  for (int t = 0; t < 2; ++t) {
    flooders.emplace_back([&] {
      auto flooder = RawClient::connect(daemon_->socketPath());
      if (!flooder.isOk() || !flooder->handshake().isOk()) return;
      auto abort = ipc::makeFrame<ipc::CommAbortFrame>(ipc::FrameType::CommAbort, 7);
      abort.commHandle = 0xdead;
      while (!stop.load(std::memory_order_relaxed)) {
        if (!flooder->send(ipc::frameBytes(abort)).isOk()) return;
        sent.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (sent.load() < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto during = timeAllreduces(*client_, comm_, a_.offset, b_.offset, kOps);
  stop = true;
  for (auto& t : flooders) t.join();
  ASSERT_EQ(during.size(), static_cast<size_t>(kOps));

  const double p99Before = percentile(before, 0.99);
  const double p99During = percentile(during, 0.99);
  const double worst = during.back();
  RecordProperty("p99_before_us", static_cast<int>(p99Before));
  RecordProperty("p99_during_us", static_cast<int>(p99During));
  RecordProperty("worst_during_us", static_cast<int>(worst));
  RecordProperty("frames_sent", static_cast<int>(sent.load()));
  EXPECT_LE(p99During, std::max(5 * p99Before, 5'000.0))
      << "p99 " << p99Before << " us before the flood, " << p99During << " us during it";
  EXPECT_LE(worst, 100'000.0) << "worst " << worst << " us during the flood";
}

}  // namespace
}  // namespace hc::integ
