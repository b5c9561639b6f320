#include "client/src/connection.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "client/src/comm_state.h"
#include "common/ipc/frames.h"
#include "common/paths.h"
#include "common/seqpacket.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace hc::client {
namespace {

std::mutex gMutex;
Connection* gConnection = nullptr;  // leaked on purpose: see abandonInChild()

void childAfterFork() {
  // Only this thread exists in the child, and the parent's locks may be held: touch no mutex.
  if (gConnection != nullptr) gConnection->abandonInChild();
  gConnection = nullptr;
  new (&gMutex) std::mutex();
}

uint32_t envSpinUs() {
  const char* s = std::getenv("HC_SPIN_US");
  if (s == nullptr) return 50;
  long v = std::strtol(s, nullptr, 10);
  return v < 0 ? 0 : static_cast<uint32_t>(std::min(v, 100000L));
}

}  // namespace

Result<Connection*> Connection::get() {
  static std::once_flag atforkOnce;
  std::call_once(atforkOnce, [] { ::pthread_atfork(nullptr, nullptr, childAfterFork); });
  std::lock_guard<std::mutex> lock(gMutex);
  if (gConnection != nullptr && !gConnection->dead()) return gConnection;
  auto* c = new Connection();
  Status s = c->connect();
  if (!s.isOk()) {
    c->abandonInChild();  // closes whatever was opened
    delete c;
    return s;
  }
  // A dead connection stays allocated: communicators of it still point at it and report errors.
  gConnection = c;
  return c;
}

Status Connection::connect() {
  pid_ = ::getpid();
  spinUs_ = envSpinUs();
  std::string path = defaultSocketPath();
  auto fd = connectSeqpacket(path);
  if (!fd.isOk()) return fd.status();
  socket_ = fd->release();

  auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 0);
  hello.minor = ipc::kProtocolMinor;
  hello.pid = static_cast<uint32_t>(pid_);
  if (const char* seg = std::getenv("HC_SEGMENT_BYTES")) hello.segmentBytes = std::strtoull(seg, nullptr, 0);
  char comm[17] = {};
  FILE* f = std::fopen("/proc/self/comm", "r");
  if (f != nullptr) {
    if (std::fgets(comm, sizeof(comm), f) == nullptr) comm[0] = '\0';
    std::fclose(f);
  }
  std::string name(comm);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  ipc::copyText(hello.clientName, name);
  HC_RETURN_IF_ERROR(sendMessage(socket_, ipc::frameBytes(hello)));
  auto msg = receiveMessage(socket_, ipc::kMaxFrameBytes, true);
  if (!msg.isOk()) return unavailable("hetero-commd closed the connection during the handshake");
  auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
  if (!type.isOk()) return Status{Code::Internal, "bad Welcome: " + type.status().message()};
  if (*type == ipc::FrameType::Error) {
    auto e = ipc::frameAs<ipc::ErrorFrame>(msg->bytes);
    return Status{static_cast<Code>(e.status), std::string("hetero-commd refused: ") + e.message};
  }
  if (*type != ipc::FrameType::Welcome) return internalError("unexpected frame instead of Welcome");
  auto w = ipc::frameAs<ipc::WelcomeFrame>(msg->bytes);
  segmentFd_ = msg->fds[0].release();
  daemonEventFd_ = msg->fds[1].release();
  daemonPid_ = static_cast<pid_t>(w.daemonPid);
  if (w.ringEntries == 0 || (w.ringEntries & (w.ringEntries - 1)) != 0) {
    return internalError("daemon announced a ring size that is not a power of two");
  }
  void* base = ::mmap(nullptr, w.segmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, segmentFd_, 0);
  if (base == MAP_FAILED) return systemError("mmap segment", errno);
  // A forked child must not share the rings: it gets no mapping and makes its own connection.
  ::madvise(base, w.segmentBytes, MADV_DONTFORK);
  view_ = ipc::SegmentView::over(base, w.segmentBytes, w.ringEntries);
  if (view_.header->magic != ipc::kSegmentMagic) return internalError("segment header is invalid");
  heapOffset_ = w.heapOffset;
  heapBytes_ = w.heapBytes;
  return okStatus();
}

void Connection::abandonInChild() {
  for (int* fd : {&socket_, &segmentFd_, &daemonEventFd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  dead_.store(true);
  deadStatus_ = unavailable("this connection belongs to the parent process (pid " +
                            std::to_string(pid_) + "); create new communicators after fork");
}

Result<std::vector<uint8_t>> Connection::request(std::span<const uint8_t> frame,
                                                 uint32_t requestId) {
  if (dead()) return deadStatus_;
  HC_RETURN_IF_ERROR(sendMessage(socket_, frame));
  auto msg = receiveMessage(socket_, ipc::kMaxFrameBytes, true);
  if (!msg.isOk()) {
    markDead(unavailable("hetero-commd (pid " + std::to_string(daemonPid_) +
                         ") closed the connection"));
    return deadStatus_;
  }
  auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
  if (!type.isOk()) return internalError("bad reply: " + type.status().message());
  auto header = ipc::frameAs<ipc::FrameHeader>(msg->bytes);
  if (*type == ipc::FrameType::Error) {
    auto e = ipc::frameAs<ipc::ErrorFrame>(msg->bytes);
    return Status{static_cast<Code>(e.status), e.message};
  }
  if (header.requestId != requestId) return internalError("reply to another request");
  return std::move(msg->bytes);
}

Result<void*> Connection::memAlloc(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::MemAllocFrame>(ipc::FrameType::MemAlloc, id);
  f.bytes = bytes;
  auto reply = request(ipc::frameBytes(f), id);
  if (!reply.isOk()) return reply.status();
  auto r = ipc::frameAs<ipc::MemAllocReplyFrame>(*reply);
  if (r.offset < heapOffset_ || r.offset + r.bytes > heapOffset_ + heapBytes_) {
    return internalError("daemon returned an allocation outside the heap");
  }
  uint8_t* p = view_.base + r.offset;
  // The daemon allocated the pages; this maps them into this process's page tables now.
  ::madvise(p, r.bytes, MADV_POPULATE_WRITE);
  return static_cast<void*>(p);
}

Status Connection::memFree(void* ptr) {
  auto ref = bufferRef(ptr, 1);
  if (!ref.isOk()) return ref.status();
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::MemFreeFrame>(ipc::FrameType::MemFree, id);
  f.offset = ref->offset;
  return request(ipc::frameBytes(f), id).status();
}

Result<ipc::BufferRef> Connection::bufferRef(const void* p, uint64_t bytes) const {
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::Segment);
  ref.offset = ipc::kNoBuffer;
  if (bytes == 0 && p == nullptr) return ref;
  auto addr = reinterpret_cast<uintptr_t>(p);
  auto heap = reinterpret_cast<uintptr_t>(view_.base + heapOffset_);
  if (p == nullptr || addr < heap || addr - heap > heapBytes_ || bytes > heapBytes_ - (addr - heap)) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "buffer %p (%llu bytes) is not in memory from hc_mem_alloc", p,
                  static_cast<unsigned long long>(bytes));
    return invalidArgument(text);
  }
  ref.offset = heapOffset_ + (addr - heap);
  return ref;
}

Result<RequestPtr> Connection::submit(ipc::SubmitEntry entry, std::shared_ptr<CommState> comm,
                                      bool tracked) {
  if (dead()) return deadStatus_;
  auto r = std::make_shared<Request>();
  r->comm = comm;
  r->tracked = tracked;
  const CommState* waitComm = comm.get();
  std::lock_guard<std::mutex> lock(submitMutex_);
  // Credits: never more in flight than the completion ring holds, so it cannot overflow.
  if (inFlight_.load() >= view_.completion.capacity()) {
    Status s = waitUntil([this] { return inFlight_.load() < view_.completion.capacity(); },
                         waitComm);
    if (!s.isOk()) return s;
  }
  r->id = nextRequestId_++;
  entry.requestId = r->id;
  {
    std::lock_guard<std::mutex> reapLock(reapMutex_);
    pending_[r->id] = r;
  }
  if (comm) comm->outstanding.fetch_add(1);
  inFlight_.fetch_add(1);
  bool pushed = view_.submit.push(entry);
  HC_CHECK(pushed);  // the daemon drains the ring faster than the credits allow it to fill
  ipc::wakeDaemonIfSleeping(view_.header, daemonEventFd_);
  return r;
}

void Connection::complete(const RequestPtr& r, const Status& status, uint64_t value) {
  r->status = status;
  r->value = value;
  if (r->comm) {
    if (!status.isOk() && !r->tracked) r->comm->setAsyncError(status);
    r->comm->outstanding.fetch_sub(1);
  }
  r->done.store(true, std::memory_order_release);
}

void Connection::reap() {
  if (dead()) return;
  std::unique_lock<std::mutex> lock(reapMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is reaping for everyone
  ipc::CompletionEntry e;
  for (;;) {
    ipc::PopResult pr = view_.completion.pop(&e);
    if (pr == ipc::PopResult::Empty) break;
    if (pr == ipc::PopResult::Corrupt) {
      lock.unlock();
      markDead(internalError("completion ring is corrupt"));
      return;
    }
    inFlight_.fetch_sub(1);
    auto it = pending_.find(e.requestId);
    if (it == pending_.end()) continue;  // failed locally already (abort)
    e.message[sizeof(e.message) - 1] = '\0';
    Status s = e.status == 0 ? okStatus() : Status{static_cast<Code>(e.status), e.message};
    complete(it->second, s, e.value);
    pending_.erase(it);
  }
}

bool Connection::daemonHungUp() const {
  pollfd p{socket_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

void Connection::markDead(const Status& why) {
  std::lock_guard<std::mutex> lock(reapMutex_);
  if (dead_.exchange(true)) return;
  deadStatus_ = why;
  for (auto& [id, r] : pending_) complete(r, why, 0);
  pending_.clear();
}

Status Connection::waitUntil(const std::function<bool()>& ready, const CommState* comm) {
  using Clock = std::chrono::steady_clock;
  const auto spinUntil = Clock::now() + std::chrono::microseconds(spinUs_);
  const Status aborted = unavailable("the communicator was aborted");
  for (;;) {
    reap();
    if (ready()) return okStatus();
    if (comm != nullptr && comm->aborted.load()) return aborted;
    if (dead()) return deadStatus_;
    if (Clock::now() < spinUntil) {
      // Ranks and the daemon often outnumber the cores: yield so the party we wait for can run.
      ::sched_yield();
      continue;
    }
    // Sleep. The sleeper count and the futex value are published before the last check, so a
    // completion posted after it either bumps the futex (the wait returns at once) or sees the
    // sleeper and wakes it (protocol.h, SegmentHeader).
    view_.header->clientSleepers.fetch_add(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    uint32_t seen = view_.header->completionFutex.load(std::memory_order_acquire);
    reap();
    if (!ready() && !(comm != nullptr && comm->aborted.load())) {
      // Bounded so that a daemon that died is noticed through the socket within 100 ms.
      ipc::futexWait(&view_.header->completionFutex, seen, 100'000'000);
    }
    view_.header->clientSleepers.fetch_sub(1);
    if (!ready() && daemonHungUp()) {
      markDead(unavailable("hetero-commd (pid " + std::to_string(daemonPid_) +
                           ") closed the connection"));
    }
  }
}

void Connection::abort(CommState* comm, uint64_t handle) {
  comm->aborted.store(true);
  if (!dead() && handle != 0) {
    std::lock_guard<std::mutex> lock(socketMutex_);
    auto f = ipc::makeFrame<ipc::CommAbortFrame>(ipc::FrameType::CommAbort, 0);
    f.commHandle = handle;
    [[maybe_unused]] Status s = sendMessage(socket_, ipc::frameBytes(f));
  }
  {
    std::lock_guard<std::mutex> lock(reapMutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second->comm.get() == comm) {
        complete(it->second, unavailable("the communicator was aborted"), 0);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (view_.header != nullptr && !dead()) {
    view_.header->completionFutex.fetch_add(1);
    ipc::futexWake(&view_.header->completionFutex, INT_MAX);
  }
}

}  // namespace hc::client
