// Loopback transport under load: many tags posted in a random (seeded) order, and two endpoints
// driven from two threads exchanging 10k messages each way, sleeping on their eventfds when idle.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/daemon/transport/loopback_test_util.h"

namespace hc::transport::testing {
namespace {

// Message i from endpoint `from`: its length (0 included) and its bytes.
size_t messageBytes(uint32_t i, PeerId from) { return (i * 37 + from * 11) % 1500; }
uint8_t messageByte(uint32_t i, PeerId from, size_t j) {
  return static_cast<uint8_t>(i * 131 + j * 7 + from);
}
std::vector<uint8_t> message(uint32_t i, PeerId from) {
  std::vector<uint8_t> m(messageBytes(i, from));
  for (size_t j = 0; j < m.size(); ++j) m[j] = messageByte(i, from, j);
  return m;
}

TEST_F(LoopbackTest, ManyTagsInRandomOrderMatchTheirOwnMessages) {
  constexpr uint32_t kMessages = 600;
  std::mt19937 rng(20240607);
  struct Op {
    bool send;
    uint32_t msg;
  };
  std::vector<Op> ops;
  std::vector<uint64_t> tags(kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) {
    tags[i] = makeTag(static_cast<uint16_t>(1 + i % 3), i / 3, static_cast<uint16_t>(rng()));
    ops.push_back({true, i});
    ops.push_back({false, i});
  }
  std::shuffle(ops.begin(), ops.end(), rng);

  std::vector<std::vector<uint8_t>> payloads(kMessages), received(kMessages);
  std::vector<RequestId> sends(kMessages), recvs(kMessages);
  for (const Op& op : ops) {
    // Alternate directions so both endpoints match in both orders.
    LoopbackTransport& from = op.msg % 2 ? a() : b();
    LoopbackTransport& to = op.msg % 2 ? b() : a();
    if (op.send) {
      payloads[op.msg] = message(op.msg, from.id());
      auto r =
          from.postSend(to.id(), tags[op.msg], payloads[op.msg].data(), payloads[op.msg].size());
      ASSERT_TRUE(r.isOk()) << r.status().toString();
      sends[op.msg] = *r;
    } else {
      received[op.msg].assign(1500, 0xee);
      auto r = to.postRecv(from.id(), tags[op.msg], received[op.msg].data(), 1500);
      ASSERT_TRUE(r.isOk()) << r.status().toString();
      recvs[op.msg] = *r;
    }
    if (rng() % 4 == 0) a().progress();
    if (rng() % 4 == 0) b().progress();
  }
  for (uint32_t i = 0; i < kMessages; ++i) {
    LoopbackTransport& from = i % 2 ? a() : b();
    LoopbackTransport& to = i % 2 ? b() : a();
    ASSERT_TRUE(finish(from, sends[i]).isOk()) << i;
    Result<size_t> got = finish(to, recvs[i]);
    ASSERT_TRUE(got.isOk()) << i << ": " << got.status().toString();
    ASSERT_EQ(*got, messageBytes(i, from.id())) << i;
    received[i].resize(*got);
    ASSERT_EQ(received[i], message(i, from.id())) << i;
  }
  EXPECT_EQ(a().progress() + b().progress(), 0u);
}

// One side of the two-thread exchange: sends kMessages to `peer` and receives as many from it,
// with up to kWindow of each in flight, checking every payload.
class Exchanger {
 public:
  static constexpr uint32_t kMessages = 10000;
  static constexpr size_t kWindow = 32;

  Exchanger(LoopbackTransport& t, PeerId peer) : t_(t), peer_(peer) {}

  void run() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sendsDone_ < kMessages || recvsDone_ < kMessages) {
      if (std::chrono::steady_clock::now() > deadline) return fail("timed out");
      while (sends_.size() < kWindow && nextSend_ < kMessages) postSend();
      while (recvs_.size() < kWindow && nextRecv_ < kMessages) postRecv();
      if (!errors_.empty()) return;
      size_t found = t_.progress();
      size_t retired = reap();
      if (!errors_.empty()) return;
      if (found == 0 && retired == 0) {
        // Idle: sleep until the peer's traffic makes our eventfd readable.
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

  void fail(const std::string& why) {
    if (errors_.empty()) errors_ = "endpoint " + std::to_string(t_.id()) + ": " + why;
  }
  void postSend() {
    InFlight f{0, nextSend_, message(nextSend_, t_.id())};
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
          if (it->buf != message(it->msg, peer_)) fail("bad payload " + std::to_string(it->msg));
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

  LoopbackTransport& t_;
  const PeerId peer_;
  std::deque<InFlight> sends_, recvs_;
  uint32_t nextSend_ = 0, nextRecv_ = 0, sendsDone_ = 0, recvsDone_ = 0;
  std::string errors_;
};

TEST_F(LoopbackTest, TwoThreadsExchangeTenThousandVerifiedMessagesEachWay) {
  Exchanger left(a(), b().id()), right(b(), a().id());
  std::thread t1([&] { left.run(); });
  std::thread t2([&] { right.run(); });
  t1.join();
  t2.join();
  EXPECT_EQ(left.errors(), "");
  EXPECT_EQ(right.errors(), "");
}

}  // namespace
}  // namespace hc::transport::testing
