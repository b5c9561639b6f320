// A backend-neutral harness for the Transport conformance tests: transports of one backend in
// this process, connected both ways, driven by hand. Waits are bounded by deadlines and sleep on
// the transports' event fds; nothing sleeps blindly.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/transport/loopback/loopback_transport.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/ucx/ucx_transport.h"
#include "tests/unit/daemon/transport/test_support.h"

namespace hc::transport::testing {

enum class Backend { Loopback, Ucx };
std::string backendName(Backend backend);

// `tag` with another chunk: a neighbouring message of the same operation.
constexpr Tag withChunk(Tag tag, uint32_t chunk) {
  tag.chunk = chunk;
  return tag;
}

// The longest a test waits for something that should happen at once.
constexpr std::chrono::milliseconds kDeadline{10000};

// True when `fd` is readable now.
bool readable(int fd);

class TransportHarness {
 public:
  explicit TransportHarness(Backend backend) : backend_(backend) {}
  // Transports go before the loopback fabric they borrow.
  ~TransportHarness();

  Backend backend() const { return backend_; }
  // Adds n transports, connects every transport to every transport (itself included) and runs a
  // message over every connection, so tests start with connections established. Uses gtest
  // assertions: check HasFatalFailure() after it.
  void attach(int n);
  Transport& at(int i) { return *transports_.at(i); }
  // The PeerId transport `from` uses for transport `to`.
  PeerId peer(int from, int to) const { return peers_.at(from).at(to); }
  PeerAddress address(int i) const { return addresses_.at(i); }
  // Destroys transport i: to its peers, its daemon failed. The others keep progressing meanwhile,
  // on another thread, as peer daemons would.
  void destroy(int i);

  // Progresses every live transport until done() holds or `timeout` passes; when none has work,
  // sleeps on their event fds (at most 50 ms at a time). Returns done().
  bool driveUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = kDeadline);
  // The final outcome of `request` on transport `who`, driving every transport meanwhile;
  // Timeout after kDeadline.
  Result<size_t> finish(int who, RequestId request);
  // Returns once every message `from` sent to `to` before the call has reached `to`'s matching:
  // a zero-byte marker, sent after them on the same connection, has been received.
  void flush(int from, int to);

 private:
  const Backend backend_;
  std::unique_ptr<LoopbackFabric> fabric_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<PeerAddress> addresses_;
  std::vector<std::vector<PeerId>> peers_;  // [from][to]
  uint32_t nextMarker_ = 0;
};

// The fixture of the conformance suites: two transports of the backend under test.
class TransportTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<TransportHarness>(GetParam());
    harness_->attach(2);
  }
  void TearDown() override { harness_.reset(); }

  Transport& a() { return harness_->at(0); }
  Transport& b() { return harness_->at(1); }
  PeerId ab() const { return harness_->peer(0, 1); }  // a's id for b
  PeerId ba() const { return harness_->peer(1, 0); }  // b's id for a
  Result<size_t> finish(int who, RequestId request) { return harness_->finish(who, request); }

  std::unique_ptr<TransportHarness> harness_;
};

// "Loopback" / "Ucx", for test names.
std::string backendParamName(const ::testing::TestParamInfo<Backend>& info);

}  // namespace hc::transport::testing
