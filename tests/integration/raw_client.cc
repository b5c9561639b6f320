#include "tests/integration/raw_client.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "common/ipc/frames.h"

namespace hc::integ {

RawClient::~RawClient() {
  if (view_.base != nullptr) ::munmap(view_.base, view_.bytes);
}

RawClient::RawClient(RawClient&& o) noexcept
    : socket_(std::move(o.socket_)),
      segmentFd_(std::move(o.segmentFd_)),
      daemonEventFd_(std::move(o.daemonEventFd_)),
      welcome_(o.welcome_),
      view_(std::exchange(o.view_, ipc::SegmentView{})),
      nextFrameId_(o.nextFrameId_),
      nextRequestId_(o.nextRequestId_) {}

Result<RawClient> RawClient::connect(const std::string& socketPath) {
  auto fd = connectSeqpacket(socketPath);
  if (!fd.isOk()) return fd.status();
  RawClient c;
  c.socket_ = std::move(*fd);
  return c;
}

Status RawClient::send(std::span<const uint8_t> bytes, std::span<const int> fds) {
  return sendMessage(socket_.get(), bytes, fds);
}

Result<ReceivedMessage> RawClient::receive(std::chrono::milliseconds timeout) {
  pollfd p{socket_.get(), POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Status{Code::Timeout, "no frame from the daemon within the timeout"};
  if (n < 0) return systemError("poll", errno);
  // One byte more than any valid frame, so an oversized reply shows up as truncated.
  return receiveMessage(socket_.get(), ipc::kMaxFrameBytes + 1, false);
}

bool RawClient::waitClosed(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    auto m = receive(left);
    if (!m.isOk()) return m.status().code() != Code::Timeout;
  }
}

Status RawClient::handshake(uint64_t segmentBytes, const std::string& name) {
  auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, nextFrameId_++);
  hello.minor = ipc::kProtocolMinor;
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.segmentBytes = segmentBytes;
  ipc::copyText(hello.clientName, name);
  HC_RETURN_IF_ERROR(send(ipc::frameBytes(hello)));
  auto m = receive();
  if (!m.isOk()) return m.status();
  auto type = ipc::validateFrame(m->bytes, m->fds.size());
  if (!type.isOk()) return type.status();
  if (*type == ipc::FrameType::Error) {
    const auto e = ipc::frameAs<ipc::ErrorFrame>(m->bytes);
    return Status{static_cast<Code>(e.status),
                  std::string(e.message, strnlen(e.message, sizeof(e.message)))};
  }
  if (*type != ipc::FrameType::Welcome) {
    return internalError("expected Welcome, got frame type " + std::to_string(int(*type)));
  }
  welcome_ = ipc::frameAs<ipc::WelcomeFrame>(m->bytes);
  segmentFd_ = std::move(m->fds[0]);
  daemonEventFd_ = std::move(m->fds[1]);
  void* base = ::mmap(nullptr, welcome_.segmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                      segmentFd_.get(), 0);
  if (base == MAP_FAILED) return systemError("mmap segment", errno);
  view_ = ipc::SegmentView::over(base, welcome_.segmentBytes, welcome_.ringEntries);
  if (view_.header->magic != ipc::kSegmentMagic) return internalError("bad segment magic");
  return okStatus();
}

Result<ipc::CmaProbeReplyFrame> RawClient::cmaProbe(
    uint64_t address, const uint8_t (&pattern)[ipc::kCmaPatternBytes], std::span<const int> fds) {
  const uint32_t id = nextFrameId_++;
  auto frame = ipc::makeFrame<ipc::CmaProbeFrame>(ipc::FrameType::CmaProbe, id);
  frame.address = address;
  std::memcpy(frame.pattern, pattern, sizeof(frame.pattern));
  HC_RETURN_IF_ERROR(send(ipc::frameBytes(frame), fds));
  auto m = receive();
  if (!m.isOk()) return m.status();
  auto type = ipc::validateFrame(m->bytes, m->fds.size());
  if (!type.isOk()) return type.status();
  if (*type == ipc::FrameType::Error) {
    const auto e = ipc::frameAs<ipc::ErrorFrame>(m->bytes);
    return Status{static_cast<Code>(e.status), e.message};
  }
  if (*type != ipc::FrameType::CmaProbeReply) return internalError("expected CmaProbeReply");
  return ipc::frameAs<ipc::CmaProbeReplyFrame>(m->bytes);
}

Result<ipc::MemAllocReplyFrame> RawClient::memAlloc(uint64_t bytes) {
  uint32_t id = nextFrameId_++;
  auto frame = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, id);
  frame.bytes = bytes;
  HC_RETURN_IF_ERROR(send(ipc::frameBytes(frame)));
  auto m = receive();
  if (!m.isOk()) return m.status();
  auto type = ipc::validateFrame(m->bytes, m->fds.size());
  if (!type.isOk()) return type.status();
  if (*type == ipc::FrameType::Error) {
    auto e = ipc::frameAs<ipc::ErrorFrame>(m->bytes);
    return Status{static_cast<Code>(e.status), e.message};
  }
  if (*type != ipc::FrameType::MemAllocReply) return internalError("expected MemAllocReply");
  auto reply = ipc::frameAs<ipc::MemAllocReplyFrame>(m->bytes);
  if (reply.header.requestId != id) return internalError("MemAllocReply for another request");
  return reply;
}

Result<uint64_t> RawClient::submit(ipc::SubmitEntry entry) {
  entry.requestId = nextRequestId_++;
  if (!view_.submit.push(entry)) return Status{Code::NoResource, "submission ring full"};
  ipc::wakeDaemonIfSleeping(view_.header, daemonEventFd_.get());
  return entry.requestId;
}

void RawClient::ringDaemon() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(daemonEventFd_.get(), &one, sizeof(one));
}

Result<ipc::CompletionEntry> RawClient::waitCompletion(uint64_t requestId,
                                                       std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ipc::CompletionEntry c;
  for (;;) {
    ipc::PopResult r = view_.completion.pop(&c);
    if (r == ipc::PopResult::Corrupt) return internalError("completion ring is corrupt");
    if (r == ipc::PopResult::Ok) {
      if (c.requestId == requestId) return c;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status{Code::Timeout, "no completion for request " + std::to_string(requestId)};
    }
    // Polling instead of the futex keeps this client independent of the wake-up path.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Result<std::vector<ipc::CompletionEntry>> RawClient::waitCompletions(
    const std::vector<uint64_t>& ids, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<ipc::CompletionEntry> out(ids.size());
  std::vector<bool> have(ids.size(), false);
  size_t missing = ids.size();
  ipc::CompletionEntry c;
  while (missing > 0) {
    ipc::PopResult r = view_.completion.pop(&c);
    if (r == ipc::PopResult::Corrupt) return internalError("completion ring is corrupt");
    if (r == ipc::PopResult::Ok) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!have[i] && ids[i] == c.requestId) {
          out[i] = c;
          have[i] = true;
          --missing;
          break;
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status{Code::Timeout, std::to_string(missing) + " of " + std::to_string(ids.size()) +
                                       " requests did not complete"};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

Result<std::vector<ipc::CompletionEntry>> RawClient::callGroup(
    std::vector<ipc::SubmitEntry> entries) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 < entries.size()) entries[i].flags |= ipc::kEntryGroupMore;
    auto id = submit(entries[i]);
    if (!id.isOk()) return id.status();
    ids.push_back(*id);
  }
  return waitCompletions(ids);
}

Result<ipc::CompletionEntry> RawClient::call(const ipc::SubmitEntry& entry) {
  auto id = submit(entry);
  if (!id.isOk()) return id.status();
  return waitCompletion(*id);
}

Result<ipc::CompletionEntry> RawClient::commInit(int32_t nranks, int32_t rank) {
  ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(ipc::OpType::CommInit);
  e.root = -1;
  e.send.offset = ipc::kNoBuffer;
  e.recv.offset = ipc::kNoBuffer;
  if (::getrandom(e.key, sizeof(e.key), 0) != static_cast<ssize_t>(sizeof(e.key))) {
    return systemError("getrandom", errno);
  }
  e.nranks = nranks;
  e.rank = rank;
  e.timeoutMs = 10000;
  return call(e);
}

Result<uint64_t> RawClient::submitCommInit(const uint8_t* key, int32_t nranks, int32_t rank) {
  ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(ipc::OpType::CommInit);
  e.root = -1;
  e.send.offset = ipc::kNoBuffer;
  e.recv.offset = ipc::kNoBuffer;
  std::memcpy(e.key, key, sizeof(e.key));
  e.nranks = nranks;
  e.rank = rank;
  e.timeoutMs = 10000;
  return submit(e);
}

bool RawClient::pollCompletion(ipc::CompletionEntry* out) {
  return view_.completion.pop(out) == ipc::PopResult::Ok;
}

void randomKey(uint8_t* key) {
  for (size_t got = 0; got < 16;) {
    ssize_t n = ::getrandom(key + got, 16 - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
}

ipc::SubmitEntry makeEntry(ipc::OpType op, uint64_t comm, uint8_t dtype, uint8_t redop,
                           uint64_t count, uint64_t sendOffset, uint64_t recvOffset, int32_t root) {
  ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(op);
  e.commHandle = comm;
  e.dtype = dtype;
  e.redop = redop;
  e.count = count;
  e.root = root;
  e.send.offset = sendOffset;
  e.recv.offset = recvOffset;
  return e;
}

std::string completionText(const ipc::CompletionEntry& c) {
  return std::string(c.message, ::strnlen(c.message, sizeof(c.message)));
}

Status checkDaemonServes(const std::string& socketPath) {
  constexpr uint64_t kCount = 1024;
  auto client = RawClient::connect(socketPath);
  if (!client.isOk()) return client.status();
  HC_RETURN_IF_ERROR(client->handshake());
  auto send = client->memAlloc(kCount * sizeof(int32_t));
  auto recv = client->memAlloc(kCount * sizeof(int32_t));
  if (!send.isOk()) return send.status();
  if (!recv.isOk()) return recv.status();
  auto* in = reinterpret_cast<int32_t*>(client->segment() + send->offset);
  auto* out = reinterpret_cast<int32_t*>(client->segment() + recv->offset);
  for (uint64_t i = 0; i < kCount; ++i) {
    in[i] = static_cast<int32_t>(i * 7 - 300);
    out[i] = -1;
  }
  auto init = client->commInit(1, 0);
  if (!init.isOk()) return init.status();
  if (init->status != 0) return Status{static_cast<Code>(init->status), completionText(*init)};
  auto done = client->call(makeEntry(ipc::OpType::AllReduce, init->value, 2 /* int32 */,
                                     static_cast<uint8_t>(ipc::RedOp::Sum), kCount, send->offset,
                                     recv->offset));
  if (!done.isOk()) return done.status();
  if (done->status != 0) return Status{static_cast<Code>(done->status), completionText(*done)};
  for (uint64_t i = 0; i < kCount; ++i) {
    if (out[i] != in[i]) {
      return internalError("one-rank allreduce: element " + std::to_string(i) + " is " +
                           std::to_string(out[i]) + ", expected " + std::to_string(in[i]));
    }
  }
  return okStatus();
}

}  // namespace hc::integ
