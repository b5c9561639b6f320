// BadInputEntryTest: a daemon per test and a raw client (RawClient) that is rank 0 of a one-rank
// communicator, with two allocations of its segment, for tests that submit entries the real
// client would never write.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {

using ipc::OpType;
using ipc::RedOp;

inline constexpr uint8_t kInt32 = 2;    // HC_INT32
inline constexpr uint8_t kFloat64 = 8;  // HC_FLOAT64
inline constexpr uint8_t kSum = static_cast<uint8_t>(RedOp::Sum);
inline constexpr uint64_t kBufferBytes = 64 << 10;

class BadInputEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    daemon_ = DaemonProcess::start({}, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    auto client = RawClient::connect(daemon_->socketPath());
    ASSERT_TRUE(client.isOk()) << client.status().toString();
    client_ = std::make_unique<RawClient>(std::move(*client));
    Status s = client_->handshake();
    ASSERT_TRUE(s.isOk()) << s.toString() << "\n" << daemon_->logTail();
    auto a = client_->memAlloc(kBufferBytes);
    auto b = client_->memAlloc(kBufferBytes);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    a_ = *a;
    b_ = *b;
    auto init = client_->commInit(1, 0);
    ASSERT_TRUE(init.isOk()) << init.status().toString();
    ASSERT_EQ(init->status, 0) << completionText(*init);
    comm_ = init->value;
  }

  void TearDown() override {
    if (!daemon_) return;
    EXPECT_TRUE(daemon_->running()) << daemon_->logTail();
    Status serves = checkDaemonServes(daemon_->socketPath());
    EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << daemon_->logTail();
    client_.reset();
    EXPECT_EQ(daemon_->stop(), 0) << daemon_->logTail();
  }

  // Submits e and checks the completion's status and that its text contains textHas.
  void expectRefused(const ipc::SubmitEntry& e, Code code, const std::string& textHas) {
    auto c = client_->call(e);
    ASSERT_TRUE(c.isOk()) << c.status().toString() << "\n" << daemon_->logTail();
    std::string text = completionText(*c);
    EXPECT_EQ(c->status, static_cast<int32_t>(code)) << "text: " << text;
    EXPECT_FALSE(text.empty());
    EXPECT_NE(text.find(textHas), std::string::npos) << "text: " << text;
  }

  ipc::SubmitEntry allreduce(uint64_t count, uint64_t send, uint64_t recv) const {
    return makeEntry(OpType::AllReduce, comm_, kInt32, kSum, count, send, recv);
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<RawClient> client_;
  ipc::MemAllocReplyFrame a_{};
  ipc::MemAllocReplyFrame b_{};
  uint64_t comm_ = 0;
};

}  // namespace hc::integ
