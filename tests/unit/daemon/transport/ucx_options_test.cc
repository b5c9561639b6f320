// UCX backend: options reach UCX, and those it cannot honour fail creation cleanly.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdio>

#include "tests/unit/daemon/transport/test_support.h"

namespace hc::transport::testing {
namespace {

TEST(UcxOptionsTest, SleepIsBoundedByHalfTheKeepaliveInterval) {
  UcxOptions options;
  EXPECT_EQ(options.keepaliveInterval, std::chrono::milliseconds(1000));
  EXPECT_EQ(maxSleep(options), std::chrono::milliseconds(500));
  options.keepaliveInterval = std::chrono::milliseconds(1);
  EXPECT_EQ(maxSleep(options), std::chrono::milliseconds(1));
}

TEST(UcxOptionsTest, CreatesWithTheTestSettings) {
  auto transport = createUcxTransport(testUcxOptions());
  ASSERT_TRUE(transport.isOk()) << transport.status().toString();
  EXPECT_EQ((*transport)->name(), "ucx");
  EXPECT_GE((*transport)->eventFd(), 0);
  EXPECT_GT((*transport)->address().bytes.size(), 16u);
  EXPECT_EQ((*transport)->progress(), 0u);
}

TEST(UcxOptionsTest, RejectsAnInterfaceSpecThatMatchesNothing) {
  UcxOptions options = testUcxOptions();
  options.socketIfname = "=no-such-interface0";
  auto transport = createUcxTransport(options);
  ASSERT_FALSE(transport.isOk());
  EXPECT_EQ(transport.status().code(), Code::InvalidArgument) << transport.status().toString();
}

TEST(UcxOptionsTest, RejectsAnUnknownTransportAndABadInterval) {
  UcxOptions options = testUcxOptions();
  options.transports = "no-such-transport";
  auto transport = createUcxTransport(options);
  EXPECT_FALSE(transport.isOk());
  options = testUcxOptions();
  options.keepaliveInterval = std::chrono::milliseconds(0);
  EXPECT_EQ(createUcxTransport(options).status().code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc::transport::testing

namespace hc::transport::testing {
namespace {

// Two connected, idle transports: the owners' loops sleep in poll instead of spinning. Counts the
// wakeups over 1.5 s (three keepalive intervals); a busy loop would count thousands.
TEST(UcxIdleTest, IdleOwnersSleepOnTheirEventFds) {
  auto a = createUcxTransport(testUcxOptions());
  auto b = createUcxTransport(testUcxOptions());
  ASSERT_TRUE(a.isOk() && b.isOk());
  Transport& ta = **a;
  Transport& tb = **b;
  auto ab = ta.connect(tb.address());
  auto ba = tb.connect(ta.address());
  ASSERT_TRUE(ab.isOk() && ba.isOk());
  // One message each way, so that both connections are fully up before the count starts.
  uint8_t x = 1, y = 0;
  RequestId recv = *tb.postRecv(*ba, makeTag(1, 0, 0), &y, 1);
  RequestId send = *ta.postSend(*ab, makeTag(1, 0, 0), &x, 1);
  const auto start = std::chrono::steady_clock::now();
  auto finished = [](Transport& t, RequestId r) {
    Result<bool> done = t.test(r);
    return done.isOk() && *done;
  };
  bool recvDone = false, sendDone = false;
  while (!(recvDone && sendDone) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    ta.progress();
    tb.progress();
    if (!sendDone) sendDone = finished(ta, send);
    if (!recvDone) recvDone = finished(tb, recv);
  }
  ASSERT_TRUE(recvDone && sendDone);

  int wakeups = 0;
  const auto countStart = std::chrono::steady_clock::now();
  const int sleepMs = static_cast<int>(maxSleep(testUcxOptions()).count());
  while (std::chrono::steady_clock::now() - countStart < std::chrono::milliseconds(1500)) {
    while (ta.progress() + tb.progress() > 0) {
    }
    pollfd fds[2] = {{ta.eventFd(), POLLIN, 0}, {tb.eventFd(), POLLIN, 0}};
    ::poll(fds, 2, sleepMs);
    ++wakeups;
  }
  RecordProperty("idle_wakeups", wakeups);
  std::printf("idle wakeups in 1.5 s: %d\n", wakeups);
  EXPECT_LT(wakeups, 50);
}

}  // namespace
}  // namespace hc::transport::testing
