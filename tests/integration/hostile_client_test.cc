// Hostile local clients, from a raw client (raw_client.h): each attack runs for a while against a
// daemon of its own, and the daemon's resident memory stays under a stated bound while a fresh
// client's allreduce keeps completing (checkDaemonServes). What one client may cost is stated in
// the README's failure behaviour section; these tests hold the daemon to it.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <string>
#include <thread>

#include "tests/integration/bad_entry_fixture.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What one attack may add to the daemon's resident memory. The daemon holds at most
// max_in_flight (4096) parked completions plus one group of 65536 ops for a client (about 40 MiB
// measured, most of it the group's ops); without those bounds the first attack below added 85 MiB
// in its 3 s and the second grew until its deadline.
constexpr long kBoundKiB = 64 << 10;

// Under AddressSanitizer (the CI stage asan runs these tests too) the daemon's resident memory also
// holds the allocator's redzones and its quarantine of freed blocks (up to 256 MiB), so it says
// nothing about the daemon's own bounds: that build checks that the attacks are survived, served
// and free of memory errors, and the main build checks the bound.
#if defined(__SANITIZE_ADDRESS__)
#define HC_HOSTILE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HC_HOSTILE_UNDER_ASAN 1
#endif
#endif
#ifdef HC_HOSTILE_UNDER_ASAN
constexpr bool kRssMeasuresTheDaemon = false;
#else
constexpr bool kRssMeasuresTheDaemon = true;
#endif

// Expects what an attack added to the daemon's resident memory to stay under kBoundKiB.
void expectRssGrowthWithinBound(long before, long after, uint64_t pushed) {
  ::testing::Test::RecordProperty("rss_growth_kib", static_cast<int>(after - before));
  if (!kRssMeasuresTheDaemon) return;
  EXPECT_LT(after - before, kBoundKiB)
      << pushed << " entries pushed; RSS " << before << " -> " << after << " KiB";
}

long rssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Pushes e again and again for `length`, never reading a completion: when the ring is full the
// client rings the daemon and sleeps 1 ms. Every 500 ms a fresh client must get served.
void floodWithoutReading(RawClient& client, DaemonProcess& daemon, const ipc::SubmitEntry& e,
                         milliseconds length, uint64_t* pushed) {
  const auto end = Clock::now() + length;
  auto nextCheck = Clock::now();
  while (Clock::now() < end) {
    if (client.submit(e).isOk()) {
      ++*pushed;
      continue;
    }
    client.ringDaemon();
    std::this_thread::sleep_for(milliseconds(1));
    if (Clock::now() >= nextCheck) {
      Status serves = checkDaemonServes(daemon.socketPath());
      ASSERT_TRUE(serves.isOk()) << serves.toString() << "\n" << daemon.logTail();
      nextCheck = Clock::now() + milliseconds(500);
    }
  }
}

// Entries that fail at once (an unknown operation), so each leaves only its completion behind.
TEST_F(BadInputEntryTest, ClientThatNeverReadsCompletionsCannotGrowTheDaemon) {
  const long before = rssKiB(daemon_->pid());
  ASSERT_GT(before, 0);
  ipc::SubmitEntry e = allreduce(1, a_.offset, b_.offset);
  e.op = 200;
  uint64_t pushed = 0;
  floodWithoutReading(*client_, *daemon_, e, milliseconds(3000), &pushed);
  const long after = rssKiB(daemon_->pid());
  expectRssGrowthWithinBound(before, after, pushed);
  RecordProperty("entries_pushed", static_cast<int>(pushed));
}

// One group that never closes: the op that would take it past ipc::kMaxGroupOps fails it, and
// every op of it completes with an error that says why. The flood then goes on unread.
TEST_F(BadInputEntryTest, GroupThatNeverClosesFailsAtItsLimitAndCannotGrowTheDaemon) {
  const long before = rssKiB(daemon_->pid());
  ipc::SubmitEntry e = allreduce(1, a_.offset, b_.offset);
  e.flags = ipc::kEntryGroupMore;
  const uint64_t total = uint64_t{ipc::kMaxGroupOps} + 1;
  uint64_t pushed = 0, failed = 0, named = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  ipc::CompletionEntry c;
  while (failed < total && Clock::now() < deadline) {
    if (pushed < total && client_->submit(e).isOk()) {
      ++pushed;
      continue;
    }
    if (!client_->pollCompletion(&c)) {
      client_->ringDaemon();
      std::this_thread::sleep_for(milliseconds(1));
      continue;
    }
    if (c.status == static_cast<int32_t>(Code::InvalidArgument)) ++failed;
    if (completionText(c).find("more than 65536 operations") != std::string::npos) ++named;
  }
  ASSERT_EQ(failed, total) << pushed << " pushed\n" << daemon_->logTail();
  EXPECT_EQ(named, total);
  floodWithoutReading(*client_, *daemon_, e, milliseconds(2000), &pushed);
  const long after = rssKiB(daemon_->pid());
  expectRssGrowthWithinBound(before, after, pushed);
}

// A join that declares more ranks than session.max_ranks (65536 by default) is refused at once,
// before the daemon holds anything of that size.
TEST_F(BadInputEntryTest, CommunicatorOfMoreRanksThanTheDaemonAllowsIsRefusedAtInit) {
  for (int32_t nranks : {65537, 1 << 20, INT32_MAX}) {
    auto c = client_->commInit(nranks, 0);
    ASSERT_TRUE(c.isOk()) << c.status().toString() << "\n" << daemon_->logTail();
    EXPECT_EQ(c->status, static_cast<int32_t>(Code::InvalidArgument)) << completionText(*c);
    EXPECT_NE(completionText(*c).find("session.max_ranks"), std::string::npos)
        << completionText(*c);
  }
}

}  // namespace
}  // namespace hc::integ
