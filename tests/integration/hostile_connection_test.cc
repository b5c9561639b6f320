// Connections that hold the daemon's slots or memory: one that never says Hello is closed at
// session.hello_timeout_ms; one uid cannot take more than session.max_clients_per_uid slots or
// session.max_segment_bytes_per_uid of segments; a large allocation is answered at once, its
// pre-fault done off the IPC thread, so other clients are not stalled behind it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::unique_ptr<DaemonProcess> startDaemon(const std::vector<std::string>& sets) {
  std::vector<std::string> args;
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  std::string error;
  auto d = DaemonProcess::start(args, &error);
  EXPECT_NE(d, nullptr) << error;
  return d;
}

TEST(HostileConnectionTest, ConnectionWithoutHelloIsClosedAtTheHelloTimeout) {
  auto daemon = startDaemon({"session.hello_timeout_ms=300"});
  ASSERT_NE(daemon, nullptr);
  auto silent = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(silent.isOk()) << silent.status().toString();
  const auto start = Clock::now();
  EXPECT_TRUE(silent->waitClosed(std::chrono::seconds(5))) << daemon->logTail();
  EXPECT_GE(Clock::now() - start, milliseconds(250));
  EXPECT_NE(daemon->log().find("no Hello within 300 ms"), std::string::npos) << daemon->logTail();
  EXPECT_TRUE(checkDaemonServes(daemon->socketPath()).isOk());
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

TEST(HostileConnectionTest, OneUidCannotTakeMoreThanItsConnections) {
  auto daemon = startDaemon({"session.max_clients_per_uid=3"});
  ASSERT_NE(daemon, nullptr);
  // The first three may wait a moment: the readiness probe of DaemonProcess::start holds a slot
  // until the daemon has read its end.
  std::vector<RawClient> held;
  const auto settle = Clock::now() + std::chrono::seconds(5);
  while (held.size() < 3 && Clock::now() < settle) {
    auto c = RawClient::connect(daemon->socketPath());
    if (c.isOk() && c->handshake().isOk()) {
      held.push_back(std::move(*c));
    } else {
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
  ASSERT_EQ(held.size(), 3u) << daemon->logTail();
  auto fourth = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(fourth.isOk());
  Status s = fourth->handshake();
  EXPECT_FALSE(s.isOk()) << "a fourth connection of the uid was welcomed";
  // The refusal is an Error frame sent at accept, then the close; when the Hello was already
  // queued on the daemon's side, the close resets the connection and the kernel reports that
  // before the queued frame. Either way no Welcome.
  EXPECT_TRUE(s.toString().find("max_clients_per_uid") != std::string::npos ||
              s.code() == Code::Unavailable)
      << s.toString();
  held.pop_back();  // a slot freed is a slot for the next connection
  auto later = Clock::now() + std::chrono::seconds(5);
  Status again = Status{Code::Unavailable, "not tried"};
  while (!again.isOk() && Clock::now() < later) {
    auto c = RawClient::connect(daemon->socketPath());
    if (c.isOk()) again = c->handshake();
  }
  EXPECT_TRUE(again.isOk()) << again.toString();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

TEST(HostileConnectionTest, OneUidCannotHoldMoreThanItsSegmentBytes) {
  auto daemon = startDaemon({"session.segment_bytes=16MiB", "session.max_segment_bytes=64MiB",
                             "session.max_segment_bytes_per_uid=96MiB"});
  ASSERT_NE(daemon, nullptr);
  auto first = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(first.isOk());
  ASSERT_TRUE(first->handshake(64 << 20).isOk()) << daemon->logTail();
  auto second = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(second.isOk());
  Status s = second->handshake(64 << 20);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.toString().find("max_segment_bytes_per_uid"), std::string::npos) << s.toString();
  auto small = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(small.isOk());
  EXPECT_TRUE(small->handshake(16 << 20).isOk()) << "what is left of the budget is still there";
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// A 2 GiB allocation (its pages pre-faulted by the daemon) against another client's allreduces:
// the allocation's answer and every allreduce come back quickly. On the IPC thread the pre-fault
// stalled the others for seconds (6.8 s measured for 2 GiB).
TEST(HostileConnectionTest, LargeAllocationDoesNotStallOtherClients) {
  auto daemon = startDaemon({"session.max_segment_bytes=3GiB"});
  ASSERT_NE(daemon, nullptr);
  auto big = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(big.isOk());
  ASSERT_TRUE(big->handshake(uint64_t{2100} << 20).isOk()) << daemon->logTail();
  const auto asked = Clock::now();
  auto alloc = big->memAlloc(uint64_t{2} << 30);
  const auto answered = Clock::now() - asked;
  ASSERT_TRUE(alloc.isOk()) << alloc.status().toString();
  EXPECT_LT(answered, milliseconds(500)) << "the allocation waited for its pre-fault";
  const auto served = Clock::now();
  Status s = checkDaemonServes(daemon->socketPath());
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_LT(Clock::now() - served, milliseconds(1000)) << "another client waited for the pre-fault";
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// A client names itself: control characters in the name reach neither the log nor hcctl raw.
TEST(HostileConnectionTest, ControlCharactersOfAClientNameAreEscaped) {
  auto daemon = startDaemon({});
  ASSERT_NE(daemon, nullptr);
  auto c = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(c.isOk());
  ASSERT_TRUE(c->handshake(16 << 20, "job\x1b[2J\n[error] forged").isOk()) << daemon->logTail();
  ASSERT_TRUE(daemon->process().waitForOutput("connected: uid", std::chrono::seconds(5)));
  const std::string log = daemon->log();
  EXPECT_NE(log.find("job\\x1b[2J\\x0a[error] forged"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape reached the log";
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// A communicator being formed by one uid cannot be joined by another that learned its key: the
// join is refused with PermissionDenied (comm.init_across_uids is off by default). Needs root: the
// second client runs as nobody.
TEST(HostileConnectionTest, AnotherUidCannotJoinACommunicatorBeingFormed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a client as another uid";
  constexpr uid_t kNobody = 65534;
  auto daemon = startDaemon({"access.allow_uids=65534"});
  ASSERT_NE(daemon, nullptr);
  // Let nobody reach the socket: its folder and the socket itself (the test's own daemon).
  for (const std::string& p : {daemon->dir(), daemon->dir() + "/run"}) ::chmod(p.c_str(), 0755);
  ::chmod(daemon->socketPath().c_str(), 0666);
  auto owner = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(owner.isOk());
  ASSERT_TRUE(owner->handshake().isOk()) << daemon->logTail();
  uint8_t key[16];
  randomKey(key);
  ASSERT_TRUE(owner->submitCommInit(key, 2, 0).isOk());
  const pid_t child = ::fork();
  if (child == 0) {
    // Exit codes: 0 refused as expected, 2 setup failed, 3 joined or refused otherwise.
    if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(2);
    }
    auto stranger = RawClient::connect(daemon->socketPath());
    if (!stranger.isOk() || !stranger->handshake().isOk()) ::_exit(2);
    auto id = stranger->submitCommInit(key, 2, 1);
    if (!id.isOk()) ::_exit(2);
    auto c = stranger->waitCompletion(*id);
    const bool refused = c.isOk() && c->status == static_cast<int32_t>(Code::PermissionDenied) &&
                         completionText(*c).find("being formed by uid 0") != std::string::npos;
    ::_exit(refused ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the stranger could not connect, 3: it was not refused\n"
                                    << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

}  // namespace
}  // namespace hc::integ
