#include "tests/fuzz/session_fixture.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"

namespace hc::fuzz {

FuzzSession::FuzzSession() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    std::abort();
  }
  client_.reset(sv[1]);
  session_ = std::make_shared<session::Session>(
      1, UniqueFd(sv[0]), session::PeerIdentity{::getpid(), ::getuid(), ::getgid()});
  // Two GPUs, so a DeviceQuery can land in range, at the edge and past it.
  session_->setDeviceEntrySource([] {
    std::vector<ipc::DeviceEntry> entries(2);
    for (auto& e : entries) std::memset(&e, 0, sizeof(e));
    ipc::copyText(entries[0].id, "sim-nvidia:0");
    ipc::copyText(entries[1].id, "sim-amd:0");
    return entries;
  });
}

Status FuzzSession::frame(std::span<const uint8_t> bytes, size_t fds) {
  std::vector<UniqueFd> owned;
  std::vector<int> raw;
  for (size_t i = 0; i < fds; ++i) {
    owned.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw.push_back(owned.back().get());
  }
  return send(bytes, raw);
}

Status FuzzSession::send(std::span<const uint8_t> bytes, std::span<const int> fds) {
  Status sent = sendMessage(client_.get(), bytes, fds);
  if (!sent.isOk()) return sent;  // e.g. larger than the socket takes: the client's own error
  // From here on, what Server::onClientSocket does with one message.
  auto msg = receiveMessage(session_->socketFd(), ipc::kMaxFrameBytes + 1);
  if (!msg.isOk()) return msg.status();
  Status bad;
  if (msg->truncated || msg->bytes.size() > ipc::kMaxFrameBytes) {
    bad = invalidArgument("frame exceeds the maximum");
  } else if (msg->fdsTruncated) {
    bad = invalidArgument("too many descriptors attached to a frame");
  } else {
    auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
    // CommAbort goes to the engine, which the fixture does not have: the frame is accepted.
    if (type.isOk() && *type == ipc::FrameType::CommAbort && session_->welcomed()) return {};
    bad = type.isOk() ? session_->handleFrame(msg->bytes, msg->fds, kDefaultSegmentBytes,
                                              kMaxSegmentBytes, kRingEntries)
                      : type.status();
  }
  drainReplies();
  return bad;
}

void FuzzSession::drainReplies() {
  for (;;) {
    auto reply = receiveMessage(client_.get(), ipc::kMaxFrameBytes + 1);
    if (!reply.isOk()) return;
    auto type = ipc::validateFrame(reply->bytes, reply->fds.size());
    if (!type.isOk() || reply->truncated) {
      std::fprintf(stderr, "the daemon sent a frame its client refuses: %s\n",
                   type.status().message().c_str());
      std::abort();
    }
    lastReply_ = std::move(reply->bytes);
  }
}

Status FuzzSession::hello() {
  auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 1);
  hello.minor = ipc::kProtocolMinor;
  hello.pid = static_cast<uint32_t>(::getpid());
  ipc::copyText(hello.clientName, "fuzz");
  return frame(ipc::frameBytes(hello), 0);
}

Status FuzzSession::enableCrossMemoryAttach() {
  session_->allowCrossMemoryAttach(true);
  // The probe reads the pattern back and writes its complement: static, so it outlives the call.
  static uint8_t probed[ipc::kCmaPatternBytes];
  auto probe = ipc::makeFrame<ipc::CmaProbeFrame>(ipc::FrameType::CmaProbe, 3);
  for (size_t i = 0; i < sizeof(probed); ++i) probe.pattern[i] = probed[i] = uint8_t(i * 7 + 1);
  probe.address = reinterpret_cast<uint64_t>(probed);
  // A probe that carries a descriptor carries this process's memory file.
  std::vector<UniqueFd> owned;
  std::vector<int> fds;
  if (ipc::frameFdCount(ipc::FrameType::CmaProbe) == 1) {
    owned.emplace_back(::open("/proc/self/mem", O_RDWR | O_CLOEXEC));
    fds.push_back(owned.back().get());
  }
  HC_RETURN_IF_ERROR(send(ipc::frameBytes(probe), fds));
  if (session_->processMemory() == nullptr) return unavailable("the kernel refused the probe");
  return {};
}

uint64_t FuzzSession::alloc(uint64_t bytes) {
  auto req = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, 2);
  req.bytes = bytes;
  lastReply_.clear();
  if (!frame(ipc::frameBytes(req), 0).isOk()) return 0;
  if (lastReply_.size() != sizeof(ipc::MemAllocReplyFrame)) return 0;
  return ipc::frameAs<ipc::MemAllocReplyFrame>(lastReply_).offset;
}

SubmitFixture& submitFixture() {
  static SubmitFixture* fixture = [] {
    auto* f = new SubmitFixture;
    if (!f->session.hello().isOk()) std::abort();
    (void)f->session.enableCrossMemoryAttach();  // without it, ProcessMemory entries are refused
    f->a = f->session.alloc(kSubmitBufferBytes);
    f->b = f->session.alloc(kSubmitBufferBytes);
    if (f->a == 0 || f->b == 0) std::abort();
    return f;
  }();
  return *fixture;
}

void quietLogs() { spdlog::set_level(spdlog::level::off); }

}  // namespace hc::fuzz
