// Shared setup for the loopback transport tests: a fabric with endpoints connected both ways,
// and bounded waits (a bug fails a test, never hangs it).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <memory>
#include <vector>

#include "daemon/transport/loopback/loopback_transport.h"

namespace hc::transport::testing {

// Final outcome of a request: progress until test() stops saying "in progress".
inline Result<size_t> finish(Transport& t, RequestId request) {
  for (int i = 0; i < 1000; ++i) {
    size_t bytes = 0;
    Result<bool> done = t.test(request, &bytes);
    if (!done.isOk()) return done.status();
    if (*done) return bytes;
    t.progress();
  }
  return Status(Code::Timeout, "request never finished");
}

inline bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

class LoopbackTest : public ::testing::Test {
 protected:
  // n endpoints, each connected to every endpoint (itself included).
  void attach(int n) {
    for (int i = 0; i < n; ++i) {
      auto ep = fabric_.attach();
      ASSERT_TRUE(ep.isOk()) << ep.status().toString();
      eps_.push_back(std::move(ep.value()));
    }
    for (auto& from : eps_) {
      for (auto& to : eps_) {
        Result<PeerId> peer = from->connect(to->address());
        ASSERT_TRUE(peer.isOk()) << peer.status().toString();
        ASSERT_EQ(*peer, to->id());
      }
    }
  }
  void SetUp() override { attach(2); }
  // Endpoints go before the fabric they borrow.
  void TearDown() override { eps_.clear(); }

  LoopbackTransport& a() { return *eps_[0]; }
  LoopbackTransport& b() { return *eps_[1]; }

  LoopbackFabric fabric_;
  std::vector<std::unique_ptr<LoopbackTransport>> eps_;
};

}  // namespace hc::transport::testing
