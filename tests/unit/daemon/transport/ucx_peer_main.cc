// ucx_transport_peer: the far side of the SIGKILL test (ucx_killed_peer_test.cc), a separate
// process as a peer daemon would be. Reads its parent's address on stdin, writes its own on
// stdout, connects, then streams messages to the parent (two in flight) until it is killed, its
// parent fails, or a minute passes.
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <deque>

#include "tests/unit/daemon/transport/test_support.h"
#include "tests/unit/daemon/transport/ucx_peer_protocol.h"

using namespace hc::transport;
using namespace hc::transport::testing;

int main() {
  auto parentAddress = readBlob(STDIN_FILENO, std::chrono::seconds(10));
  if (!parentAddress) return 2;
  const UcxOptions options = testUcxOptions();
  auto transport = createUcxTransport(options);
  if (!transport.isOk()) {
    std::fprintf(stderr, "peer: %s\n", transport.status().toString().c_str());
    return 3;
  }
  Transport& t = **transport;
  if (!writeBlob(STDOUT_FILENO, t.address().bytes)) return 4;
  auto parent = t.connect(PeerAddress{*parentAddress});
  if (!parent.isOk()) return 5;
  bool parentGone = false;
  t.setPeerFailureHandler([&](PeerId, const hc::Status&) { parentGone = true; });

  const std::vector<uint8_t> payload = pattern(kStreamBytes, kStreamSeed);
  std::deque<RequestId> inFlight;
  uint32_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!parentGone && std::chrono::steady_clock::now() < deadline) {
    while (inFlight.size() < 2) {
      auto send =
          t.postSend(*parent, makeTag(kStreamComm, next++, 0), payload.data(), payload.size());
      if (!send.isOk()) return 6;
      inFlight.push_back(*send);
    }
    size_t work = t.progress();
    while (!inFlight.empty()) {
      auto done = t.test(inFlight.front());
      if (!done.isOk()) return 7;
      if (!*done) break;
      inFlight.pop_front();
      ++work;
    }
    if (work == 0) {
      pollfd p{t.eventFd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(maxSleep(options).count()));
    }
  }
  return 0;
}
