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
#include "client/src/server_trust.h"
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

// Library teardown (dlclose or exit): idle staging blocks go back to the daemon. Best effort and
// never waiting on another thread; the daemon frees the whole segment when the socket closes.
__attribute__((destructor)) void releaseStagingAtTeardown() {
  if (gConnection != nullptr) gConnection->teardown();
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
  auto c = open();
  if (!c.isOk()) return c.status();
  // A dead connection stays allocated: communicators of it still point at it and report errors.
  gConnection = *c;
  return *c;
}

Connection* Connection::current() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gConnection;
}

Result<Connection*> Connection::open() {
  auto* c = new Connection();
  Status s = c->connect();
  if (s.isOk() && c->probeCrossMemoryAttach() == ProbeOutcome::ConnectionLost) {
    // A daemon that does not know the probe refuses the frame and closes the connection: connect
    // again without asking, and keep the reason for hc_get_memory_path.
    std::string path = std::move(c->memoryPath_);
    c->discard();
    c = new Connection();
    s = c->connect();
    c->memoryPath_ = std::move(path);
  }
  if (!s.isOk()) {
    c->discard();
    return s;
  }
  return c;
}

void Connection::discard() {
  abandonInChild();  // closes whatever was opened
  if (view_.base != nullptr) ::munmap(view_.base, view_.bytes);
  delete this;
}

Status Connection::connect() {
  pid_ = ::getpid();
  spinUs_ = envSpinUs();
  std::string path = defaultSocketPath();
  auto fd = connectSeqpacket(path);
  if (!fd.isOk()) return fd.status();
  socket_ = fd->release();
  // Before the first frame: Hello already names this process, and later frames hand over its
  // memory. A refusal leaves the socket to discard(), which closes it unused.
  HC_RETURN_IF_ERROR(checkServer(socket_, path));

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
  daemonMinor_ = w.minor;
  if (w.ringEntries == 0 || (w.ringEntries & (w.ringEntries - 1)) != 0) {
    return internalError("daemon announced a ring size that is not a power of two");
  }
  HC_RETURN_IF_ERROR(checkSegmentFd(segmentFd_, w.segmentBytes));
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
  // The daemon's attach reaches the parent's address space: an address from this process must
  // never reach it. memoryPath_ stays as it was, since hc_get_memory_path may have handed out
  // its characters.
  crossMemoryAttach_ = false;
  deadStatus_ = unavailable("this connection belongs to the parent process (pid " +
                            std::to_string(pid_) + "); create new communicators after fork");
  dead_.store(true, std::memory_order_release);
}

void Connection::teardown() {
  if (pid_ != ::getpid() || dead()) return;
  staging_.trim(/*wait=*/false);
}

Result<std::vector<uint8_t>> Connection::request(std::span<const uint8_t> frame,
                                                 uint32_t requestId, std::span<const int> fds) {
  if (dead()) return deadStatus_;
  HC_RETURN_IF_ERROR(sendMessage(socket_, frame, fds));
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

Result<Connection::AreaGrant> Connection::commArea(uint64_t handle) {
  std::lock_guard<std::mutex> lock(socketMutex_);
  if (dead()) return deadStatus_;
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::CommAreaFrame>(ipc::FrameType::CommArea, id);
  f.commHandle = handle;
  HC_RETURN_IF_ERROR(sendMessage(socket_, ipc::frameBytes(f)));
  auto msg = receiveMessage(socket_, ipc::kMaxFrameBytes, true);
  if (!msg.isOk()) {
    markDead(
        unavailable("hetero-commd (pid " + std::to_string(daemonPid_) + ") closed the connection"));
    return deadStatus_;
  }
  auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
  if (!type.isOk()) return internalError("bad CommArea reply: " + type.status().message());
  if (*type == ipc::FrameType::Error) {
    auto e = ipc::frameAs<ipc::ErrorFrame>(msg->bytes);
    return Status{static_cast<Code>(e.status), e.message};
  }
  if (*type != ipc::FrameType::CommAreaReply ||
      ipc::frameAs<ipc::FrameHeader>(msg->bytes).requestId != id) {
    return internalError("reply to another request");
  }
  AreaGrant grant;
  grant.reply = ipc::frameAs<ipc::CommAreaReplyFrame>(msg->bytes);
  if (grant.reply.present == 1) grant.fd = std::move(msg->fds[0]);
  return grant;
}

Result<void*> Connection::memAlloc(uint64_t bytes) {
  auto block = allocBlock(bytes);
  if (!block.isOk()) return block.status();
  return block->ptr;
}

Result<SegmentBlock> Connection::allocBlock(uint64_t bytes) {
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
  return SegmentBlock{p, r.offset, r.bytes};
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

Result<std::string> Connection::peerAddress() {
  if (daemonMinor_ < 2) return std::string();
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::PeerInfoFrame>(ipc::FrameType::PeerInfo, id);
  auto reply = request(ipc::frameBytes(f), id);
  if (!reply.isOk()) return reply.status();
  if (ipc::frameAs<ipc::FrameHeader>(*reply).type !=
      static_cast<uint16_t>(ipc::FrameType::PeerInfoReply)) {
    return internalError("unexpected reply to PeerInfo");
  }
  return std::string(ipc::frameAs<ipc::PeerInfoReplyFrame>(*reply).address);
}

Status Connection::nameCommRoot(const uint8_t (&key)[16], const std::string& rootAddress) {
  if (daemonMinor_ < 2) {
    return unavailable("the unique id names a root daemon (" + rootAddress +
                       "), but this hetero-commd predates multi-node jobs");
  }
  if (rootAddress.size() >= ipc::kPeerAddressBytes) return invalidArgument("root address too long");
  std::lock_guard<std::mutex> lock(socketMutex_);
  uint32_t id = nextFrameId_++;
  auto f = ipc::makeFrame<ipc::CommRootFrame>(ipc::FrameType::CommRoot, id);
  std::memcpy(f.key, key, sizeof(f.key));
  ipc::copyText(f.address, rootAddress);
  return request(ipc::frameBytes(f), id).status();
}

Result<bool> Connection::inSegment(const void* p, uint64_t bytes) const {
  // The messages continue the caller's prefix ("send buffer ...").
  char text[160];
  if (p == nullptr) {
    std::snprintf(text, sizeof(text), "is NULL but the operation uses %llu bytes of it",
                  static_cast<unsigned long long>(bytes));
    return invalidArgument(text);
  }
  auto addr = reinterpret_cast<uintptr_t>(p);
  uintptr_t end = 0;
  if (__builtin_add_overflow(addr, bytes, &end)) {
    std::snprintf(text, sizeof(text), "%p + %llu bytes wraps around the address space", p,
                  static_cast<unsigned long long>(bytes));
    return invalidArgument(text);
  }
  auto heap = reinterpret_cast<uintptr_t>(view_.base + heapOffset_);
  uintptr_t heapEnd = heap + heapBytes_;
  if (addr >= heap && end <= heapEnd) return true;
  if (addr < heapEnd && end > heap) {
    std::snprintf(text, sizeof(text), "%p (%llu bytes) straddles the edge of hc_mem_alloc memory",
                  p, static_cast<unsigned long long>(bytes));
    return invalidArgument(text);
  }
  return false;
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

}  // namespace hc::client
