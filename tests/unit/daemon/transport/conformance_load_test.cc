// Transport conformance, every backend, under load: a grid of message sizes (0 to 16 MiB) in both
// orders, many tags posted in a random (seeded) order, and two transports driven from two threads
// exchanging thousands of verified messages, sleeping on their event fds when idle.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/unit/daemon/transport/transport_harness.h"

namespace hc::transport::testing {
namespace {

// ---- sizes --------------------------------------------------------------------------------------

class SizeTest : public ::testing::TestWithParam<std::tuple<Backend, size_t>> {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<TransportHarness>(std::get<0>(GetParam()));
    harness_->attach(2);
  }
  std::unique_ptr<TransportHarness> harness_;
};

TEST_P(SizeTest, DeliversEveryByteInBothOrders) {
  const size_t bytes = std::get<1>(GetParam());
  Transport& a = harness_->at(0);
  Transport& b = harness_->at(1);
  const PeerId ab = harness_->peer(0, 1), ba = harness_->peer(1, 0);
  const std::vector<uint8_t> data = pattern(bytes, static_cast<uint32_t>(bytes));
  for (bool recvFirst : {false, true}) {
    SCOPED_TRACE(recvFirst ? "receive posted first" : "send posted first");
    std::vector<uint8_t> got(bytes + 1, 0xee);  // one spare byte: the length must be exact
    const Tag tag = makeTag(3, recvFirst, 0);
    Result<RequestId> recv = Status(Code::Internal, "not posted");
    if (recvFirst) recv = b.postRecv(ba, tag, got.data(), got.size());
    Result<RequestId> send = a.postSend(ab, tag, data.data(), bytes);
    ASSERT_TRUE(send.isOk()) << send.status().toString();
    if (!recvFirst) {
      harness_->flush(0, 1);
      recv = b.postRecv(ba, tag, got.data(), got.size());
    }
    ASSERT_TRUE(recv.isOk()) << recv.status().toString();
    Result<size_t> received = harness_->finish(1, *recv);
    ASSERT_TRUE(received.isOk()) << received.status().toString();
    EXPECT_EQ(*received, bytes);
    Result<size_t> sent = harness_->finish(0, *send);
    ASSERT_TRUE(sent.isOk()) << sent.status().toString();
    EXPECT_EQ(*sent, bytes);
    got.resize(bytes);
    EXPECT_TRUE(got == data) << "payload differs";
  }
}

std::string sizeParamName(const ::testing::TestParamInfo<std::tuple<Backend, size_t>>& info) {
  return backendName(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
}

// 0, 1, around UCX's inline limit (8 KiB), a rendezvous size, and 16 MiB.
INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, SizeTest,
                         ::testing::Combine(::testing::Values(Backend::Loopback, Backend::Ucx),
                                            ::testing::Values(0, 1, 4097, 8192, 8193, (1 << 20) + 3,
                                                              16 << 20)),
                         sizeParamName);

// ---- many tags ----------------------------------------------------------------------------------

using LoadTest = TransportTest;

TEST_P(LoadTest, ManyTagsInRandomOrderMatchTheirOwnMessages) {
  constexpr uint32_t kMessages = 600;
  std::mt19937 rng(20240607);
  auto sizeOf = [](uint32_t i) { return i % 50 == 0 ? size_t(64 * 1024 + i) : (i * 37) % 1500; };
  struct Op {
    bool send;
    uint32_t msg;
  };
  std::vector<Op> ops;
  std::vector<Tag> tags(kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) {
    // Communicators and operations that differ only in high bits, and any chunk.
    tags[i] =
        makeTag(uint64_t{1 + i % 3} << 40, uint64_t{i / 3} << 32, static_cast<uint32_t>(rng()));
    ops.push_back({true, i});
    ops.push_back({false, i});
  }
  std::shuffle(ops.begin(), ops.end(), rng);

  std::vector<std::vector<uint8_t>> payloads(kMessages), received(kMessages);
  std::vector<RequestId> sends(kMessages), recvs(kMessages);
  // Message i goes from `from(i)` to the other transport: both match in both orders.
  auto from = [](uint32_t i) { return static_cast<int>(i % 2); };
  for (const Op& op : ops) {
    const int src = from(op.msg), dst = 1 - src;
    if (op.send) {
      payloads[op.msg] = pattern(sizeOf(op.msg), op.msg);
      auto r = harness_->at(src).postSend(harness_->peer(src, dst), tags[op.msg],
                                          payloads[op.msg].data(), payloads[op.msg].size());
      ASSERT_TRUE(r.isOk()) << r.status().toString();
      sends[op.msg] = *r;
    } else {
      received[op.msg].assign(sizeOf(op.msg), 0xee);
      auto r = harness_->at(dst).postRecv(harness_->peer(dst, src), tags[op.msg],
                                          received[op.msg].data(), received[op.msg].size());
      ASSERT_TRUE(r.isOk()) << r.status().toString();
      recvs[op.msg] = *r;
    }
    if (rng() % 4 == 0) a().progress();
    if (rng() % 4 == 0) b().progress();
  }
  for (uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(finish(from(i), sends[i]).isOk()) << i;
    Result<size_t> got = finish(1 - from(i), recvs[i]);
    ASSERT_TRUE(got.isOk()) << i << ": " << got.status().toString();
    ASSERT_EQ(*got, sizeOf(i)) << i;
    ASSERT_TRUE(received[i] == payloads[i]) << i;
  }
}

// ---- two threads --------------------------------------------------------------------------------

// One side of the two-thread exchange: sends kMessages to `peer` and receives as many from it,
// with up to kWindow of each in flight, checking every payload. Drives its transport alone.
class Exchanger {
 public:
  static constexpr uint32_t kMessages = 5000;
  static constexpr size_t kWindow = 32;

  Exchanger(Transport& t, PeerId peer, uint32_t self, uint32_t other)
      : t_(t), peer_(peer), self_(self), other_(other) {}

  void run() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sendsDone_ < kMessages || recvsDone_ < kMessages) {
      if (std::chrono::steady_clock::now() > deadline) return fail("timed out");
      while (sends_.size() < kWindow && nextSend_ < kMessages) postSend();
      while (recvs_.size() < kWindow && nextRecv_ < kMessages) postRecv();
      if (!errors_.empty()) return;
      const size_t found = t_.progress();
      const size_t retired = reap();
      if (!errors_.empty()) return;
      if (found == 0 && retired == 0) {
        // Idle: sleep until the peer's traffic makes our event fd readable.
        pollfd p{t_.eventFd(), POLLIN, 0};
        ::poll(&p, 1, 100);
      }
    }
  }
  const std::string& errors() const { return errors_; }

 private:
  struct InFlight {
    RequestId id;
    uint32_t msg;
    std::vector<uint8_t> buf;
  };
  static size_t bytesOf(uint32_t i, uint32_t from) { return (i * 37 + from * 11) % 1500; }
  static std::vector<uint8_t> message(uint32_t i, uint32_t from) {
    return pattern(bytesOf(i, from), i * 2 + from);
  }

  void fail(const std::string& why) {
    if (errors_.empty()) errors_ = "side " + std::to_string(self_) + ": " + why;
  }
  void postSend() {
    InFlight f{0, nextSend_, message(nextSend_, self_)};
    auto r = t_.postSend(peer_, makeTag(5, nextSend_, 0), f.buf.data(), f.buf.size());
    if (!r.isOk()) return fail("postSend: " + r.status().toString());
    f.id = *r;
    sends_.push_back(std::move(f));
    ++nextSend_;
  }
  void postRecv() {
    InFlight f{0, nextRecv_, std::vector<uint8_t>(1500)};
    auto r = t_.postRecv(peer_, makeTag(5, nextRecv_, 0), f.buf.data(), f.buf.size());
    if (!r.isOk()) return fail("postRecv: " + r.status().toString());
    f.id = *r;
    recvs_.push_back(std::move(f));
    ++nextRecv_;
  }
  // Tests every request in flight; returns how many finished.
  size_t reap() {
    size_t retired = 0;
    for (auto* queue : {&sends_, &recvs_}) {
      const bool isRecv = queue == &recvs_;
      for (auto it = queue->begin(); it != queue->end();) {
        size_t bytes = 0;
        Result<bool> done = t_.test(it->id, &bytes);
        if (!done.isOk()) {
          fail("test: " + done.status().toString());
          return retired;
        }
        if (!*done) {
          ++it;
          continue;
        }
        if (isRecv) {
          it->buf.resize(bytes);
          if (it->buf != message(it->msg, other_)) fail("bad payload " + std::to_string(it->msg));
          ++recvsDone_;
        } else {
          ++sendsDone_;
        }
        it = queue->erase(it);
        ++retired;
      }
    }
    return retired;
  }

  Transport& t_;
  const PeerId peer_;
  const uint32_t self_, other_;
  std::deque<InFlight> sends_, recvs_;
  uint32_t nextSend_ = 0, nextRecv_ = 0, sendsDone_ = 0, recvsDone_ = 0;
  std::string errors_;
};

TEST_P(LoadTest, TwoThreadsExchangeThousandsOfVerifiedMessagesEachWay) {
  Exchanger left(a(), ab(), 0, 1), right(b(), ba(), 1, 0);
  std::thread t1([&] { left.run(); });
  std::thread t2([&] { right.run(); });
  t1.join();
  t2.join();
  EXPECT_EQ(left.errors(), "");
  EXPECT_EQ(right.errors(), "");
}

INSTANTIATE_TEST_SUITE_P(LoopbackAndUcx, LoadTest,
                         ::testing::Values(Backend::Loopback, Backend::Ucx), backendParamName);

}  // namespace
}  // namespace hc::transport::testing
