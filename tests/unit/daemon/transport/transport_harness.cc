#include "tests/unit/daemon/transport/transport_harness.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace hc::transport::testing {
namespace {

// Markers for flush() use a communicator no test uses.
constexpr uint64_t kMarkerComm = 0xfffe;

}  // namespace

std::string backendName(Backend backend) {
  return backend == Backend::Loopback ? "Loopback" : "Ucx";
}

std::string backendParamName(const ::testing::TestParamInfo<Backend>& info) {
  return backendName(info.param);
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TransportHarness::~TransportHarness() { transports_.clear(); }

void TransportHarness::attach(int n) {
  if (backend_ == Backend::Loopback && !fabric_) fabric_ = std::make_unique<LoopbackFabric>();
  const size_t first = transports_.size();
  for (int i = 0; i < n; ++i) {
    Result<std::unique_ptr<Transport>> made = Status(Code::Internal, "no backend");
    if (backend_ == Backend::Loopback) {
      auto endpoint = fabric_->attach();
      if (endpoint.isOk()) {
        made = std::unique_ptr<Transport>(std::move(endpoint.value()));
      } else {
        made = endpoint.status();
      }
    } else {
      made = createUcxTransport(testUcxOptions());
    }
    ASSERT_TRUE(made.isOk()) << made.status().toString();
    addresses_.push_back(made.value()->address());
    transports_.push_back(std::move(made.value()));
  }
  // Connect every pair, both ways, old transports to new ones included.
  peers_.resize(transports_.size());
  for (size_t from = 0; from < transports_.size(); ++from) {
    peers_[from].resize(transports_.size());
    for (size_t to = 0; to < transports_.size(); ++to) {
      if (from < first && to < first) continue;
      Result<PeerId> peer = transports_[from]->connect(addresses_[to]);
      ASSERT_TRUE(peer.isOk()) << peer.status().toString();
      peers_[from][to] = *peer;
    }
  }
  for (size_t from = 0; from < transports_.size(); ++from) {
    for (size_t to = 0; to < transports_.size(); ++to) {
      if (from < first && to < first) continue;
      flush(static_cast<int>(from), static_cast<int>(to));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void TransportHarness::destroy(int i) {
  std::unique_ptr<Transport> victim = std::move(transports_.at(i));
  std::atomic<bool> destroyed{false};
  // Each transport stays driven by one thread at a time: the victim by this one, the others by
  // the helper until the victim is gone.
  std::thread others([&] { driveUntil([&] { return destroyed.load(); }); });
  victim.reset();
  destroyed = true;
  others.join();
}

bool TransportHarness::driveUntil(const std::function<bool()>& done,
                                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    size_t work = 0;
    for (auto& transport : transports_) {
      if (transport) work += transport->progress();
    }
    if (done()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (work > 0) continue;
    // Every transport reported nothing to do: sleep until one has something.
    std::vector<pollfd> fds;
    for (auto& transport : transports_) {
      if (transport) fds.push_back(pollfd{transport->eventFd(), POLLIN, 0});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count() + 1, 50)));
  }
}

Result<size_t> TransportHarness::finish(int who, RequestId request) {
  Result<size_t> outcome = Status(Code::Timeout, "request never finished");
  driveUntil([&] {
    size_t bytes = 0;
    Result<bool> done = at(who).test(request, &bytes);
    if (!done.isOk()) {
      outcome = done.status();
      return true;
    }
    if (*done) outcome = bytes;
    return *done;
  });
  return outcome;
}

void TransportHarness::flush(int from, int to) {
  const Tag tag = makeTag(kMarkerComm, nextMarker_++, 0);
  Result<RequestId> recv = at(to).postRecv(peer(to, from), tag, nullptr, 0);
  ASSERT_TRUE(recv.isOk()) << recv.status().toString();
  Result<RequestId> send = at(from).postSend(peer(from, to), tag, nullptr, 0);
  ASSERT_TRUE(send.isOk()) << send.status().toString();
  Result<size_t> received = finish(to, *recv);
  ASSERT_TRUE(received.isOk()) << received.status().toString();
  Result<size_t> sent = finish(from, *send);
  ASSERT_TRUE(sent.isOk()) << sent.status().toString();
}

}  // namespace hc::transport::testing
