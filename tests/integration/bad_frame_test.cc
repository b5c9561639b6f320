// Malformed socket frames: the daemon answers one Error frame (InvalidArgument, with a message
// naming the problem), closes that connection, and keeps serving everyone else.
#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/ipc/frames.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytesOf(const T& frame) {
  auto s = ipc::frameBytes(frame);
  return Bytes(s.begin(), s.end());
}

ipc::HelloFrame hello() {
  auto h = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 1);
  h.minor = ipc::kProtocolMinor;
  h.pid = 1;
  ipc::copyText(h.clientName, "bad-frame-test");
  return h;
}

struct BadFrame {
  std::string name;
  bool afterHello;  // sent after a successful handshake
  bool strayFd;     // an eventfd attached to a frame type that takes none
  std::function<Bytes()> bytes;
  std::string messageHas;  // "" = any non-empty message
};

void PrintTo(const BadFrame& c, std::ostream* os) { *os << c.name; }

std::vector<BadFrame> badFrames() {
  std::vector<BadFrame> cases;
  cases.push_back({"ShorterThanHeader", false, false,
                   [] {
                     Bytes b = bytesOf(hello());
                     b.resize(6);
                     return b;
                   },
                   ""});
  cases.push_back({"TruncatedHello", false, false,
                   [] {
                     Bytes b = bytesOf(hello());
                     b.resize(sizeof(ipc::FrameHeader) + 4);
                     return b;
                   },
                   ""});
  cases.push_back({"Oversized", false, false,
                   [] {
                     Bytes b(2 * ipc::kMaxFrameBytes + 17, 0);
                     auto h = hello();
                     h.header.length = static_cast<uint32_t>(b.size());
                     std::memcpy(b.data(), &h, sizeof(h));
                     return b;
                   },
                   ""});
  cases.push_back({"Garbage", false, false,
                   [] {
                     Bytes b(96);
                     for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 131 + 7);
                     return b;
                   },
                   ""});
  cases.push_back({"BadMagic", false, false,
                   [] {
                     auto h = hello();
                     h.header.magic = 0xDEADBEEF;
                     return bytesOf(h);
                   },
                   ""});
  cases.push_back({"WrongProtocolMajor", false, false,
                   [] {
                     auto h = hello();
                     h.header.major = ipc::kProtocolMajor + 1;
                     return bytesOf(h);
                   },
                   "protocol version"});
  cases.push_back({"UnknownType", false, false,
                   [] {
                     auto f =
                         ipc::makeFrame<ipc::MemFreeReplyFrame>(ipc::FrameType::MemFreeReply, 1);
                     f.header.type = 99;
                     return bytesOf(f);
                   },
                   ""});
  cases.push_back({"StrayFdOnHello", false, true, [] { return bytesOf(hello()); }, ""});
  cases.push_back({"StrayFdOnMemAlloc", true, true,
                   [] {
                     auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 2);
                     f.bytes = 4096;
                     return bytesOf(f);
                   },
                   ""});
  cases.push_back({"TruncatedMemAlloc", true, false,
                   [] {
                     auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 2);
                     Bytes b = bytesOf(f);
                     b.resize(b.size() - 3);
                     return b;
                   },
                   ""});
  cases.push_back({"WrongMajorAfterHello", true, false,
                   [] {
                     auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 2);
                     f.header.major = ipc::kProtocolMajor + 7;
                     f.bytes = 4096;
                     return bytesOf(f);
                   },
                   "protocol version"});
  cases.push_back({"TruncatedDeviceQuery", true, false,
                   [] {
                     auto f = ipc::makeFrame<ipc::DeviceQueryFrame>(ipc::FrameType::DeviceQuery, 2);
                     Bytes b = bytesOf(f);
                     b.resize(b.size() - 4);
                     return b;
                   },
                   "expected " + std::to_string(sizeof(ipc::DeviceQueryFrame))});
  cases.push_back({"LongDeviceQuery", true, false,
                   [] {
                     auto f = ipc::makeFrame<ipc::DeviceQueryFrame>(ipc::FrameType::DeviceQuery, 2);
                     Bytes b = bytesOf(f);
                     b.resize(b.size() + 8);
                     auto h = ipc::frameAs<ipc::FrameHeader>(b);
                     h.length = static_cast<uint32_t>(b.size());
                     std::memcpy(b.data(), &h, sizeof(h));
                     return b;
                   },
                   "expected " + std::to_string(sizeof(ipc::DeviceQueryFrame))});
  // A reply type is not a request, however well formed.
  cases.push_back({"DeviceQueryReplyFromClient", true, false,
                   [] {
                     return bytesOf(ipc::makeFrame<ipc::DeviceQueryReplyFrame>(
                         ipc::FrameType::DeviceQueryReply, 2));
                   },
                   "is not a request"});
  // Well-formed frames in the wrong order are protocol violations too.
  cases.push_back({"MemAllocBeforeHello", false, false,
                   [] {
                     auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 1);
                     f.bytes = 4096;
                     return bytesOf(f);
                   },
                   ""});
  cases.push_back({"SecondHello", true, false, [] { return bytesOf(hello()); }, ""});
  return cases;
}

// Sends c on a new connection and checks the Error frame and the close. Returns "" or a failure.
std::string sendBadFrame(const DaemonProcess& daemon, const BadFrame& c) {
  auto client = RawClient::connect(daemon.socketPath());
  if (!client.isOk()) return "connect: " + client.status().toString();
  if (c.afterHello) {
    Status s = client->handshake();
    if (!s.isOk()) return "handshake: " + s.toString();
  }
  Bytes bytes = c.bytes();
  UniqueFd stray(::eventfd(0, EFD_CLOEXEC));
  int fds[] = {stray.get()};
  Status sent = client->send(bytes, c.strayFd ? std::span<const int>(fds) : std::span<const int>());
  if (!sent.isOk()) return "send: " + sent.toString();
  auto reply = client->receive();
  if (!reply.isOk()) return "no Error frame: " + reply.status().toString();
  auto type = ipc::validateFrame(reply->bytes, reply->fds.size());
  if (!type.isOk()) return "invalid reply frame: " + type.status().toString();
  if (*type != ipc::FrameType::Error) return "reply is frame type " + std::to_string(int(*type));
  auto error = ipc::frameAs<ipc::ErrorFrame>(reply->bytes);
  std::string message = error.message;
  std::string what =
      " (Error status " + std::to_string(error.status) + ", message '" + message + "')";
  if (error.status != static_cast<int32_t>(Code::InvalidArgument)) return "wrong status" + what;
  if (message.empty()) return "empty message" + what;
  if (message.find(c.messageHas) == std::string::npos) {
    return "message lacks '" + c.messageHas + "'" + what;
  }
  if (!client->waitClosed()) return "the daemon kept the connection open" + what;
  return "";
}

class BadInputFrameTest : public ::testing::TestWithParam<BadFrame> {};

TEST_P(BadInputFrameTest, AnswersErrorClosesAndKeepsServing) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  const int baseline = daemon->settledFdCount();
  EXPECT_EQ(sendBadFrame(*daemon, GetParam()), "") << daemon->logTail();
  ASSERT_TRUE(daemon->running()) << daemon->logTail();
  // Nothing of the refused connection stays open, the descriptors it attached included.
  EXPECT_EQ(daemon->waitForFdCount(baseline, std::chrono::seconds(5)), baseline);
  Status serves = checkDaemonServes(daemon->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Frames, BadInputFrameTest, ::testing::ValuesIn(badFrames()),
                         [](const auto& p) { return p.param.name; });

TEST(BadInputConcurrencyTest, RunningJobIsUndisturbedByMalformedClients) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "loop", 2,
                            {"--mode", "loop", "--seconds", "3", "--count", "4096"}, &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->waitAllOutput("progress", std::chrono::seconds(20))) << job->report();
  // Several rounds, so malformed frames arrive while collectives are in flight.
  for (int round = 0; round < 5; ++round) {
    for (const BadFrame& c : badFrames()) {
      EXPECT_EQ(sendBadFrame(*daemon, c), "") << c.name;
    }
  }
  ASSERT_TRUE(job->waitAll(std::chrono::seconds(60))) << job->report();
  for (int r = 0; r < job->nranks(); ++r) {
    EXPECT_EQ(job->rank(r).exitCode(), 0) << job->report();
    auto result = findStatusLine(job->rank(r).output(), "result");
    ASSERT_TRUE(result.has_value()) << job->report();
    EXPECT_EQ(result->status, 0) << job->report();
  }
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

}  // namespace
}  // namespace hc::integ
