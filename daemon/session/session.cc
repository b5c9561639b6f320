#include "daemon/session/session.h"

#include <fcntl.h>
#include <sys/eventfd.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"
#include "daemon/session/communicator.h"

namespace hc::session {
namespace {

// The client names itself: a name that goes to logs, hcctl and the status board with its
// control characters (a terminal's escape sequences, a forged log line) escaped as \xNN.
std::string printableName(const char* raw, size_t capacity) {
  std::string out;
  for (size_t i = 0; i < capacity && raw[i] != '\0'; ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

constexpr uint64_t kMinHeapBytes = 1ull << 20;

uint64_t pageUp(uint64_t v) { return (v + ipc::kHeapAlignment - 1) & ~(ipc::kHeapAlignment - 1); }
}  // namespace

Session::Session(uint32_t id, UniqueFd socket, PeerIdentity peer)
    : id_(id), socket_(std::move(socket)), peer_(peer) {}

std::string Session::describe() const {
  return "client " + std::to_string(id_) + " (pid " + std::to_string(peer_.pid) + ")";
}

Status Session::handleFrame(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds,
                            uint64_t defaultSegment, uint64_t maxSegment, uint32_t ringEntries) {
  auto type = ipc::validateFrame(bytes, fds.size());
  if (!type.isOk()) return type.status();
  if (!welcomed() && *type != ipc::FrameType::Hello) {
    return invalidArgument("the first frame must be Hello");
  }
  switch (*type) {
    case ipc::FrameType::Hello:
      if (welcomed()) return invalidArgument("Hello sent twice");
      return onHello(bytes, defaultSegment, maxSegment, ringEntries);
    case ipc::FrameType::MemAlloc:
      return onMemAlloc(bytes);
    case ipc::FrameType::MemFree:
      return onMemFree(bytes);
    case ipc::FrameType::CmaProbe:
      return onCmaProbe(bytes, fds);
    case ipc::FrameType::PeerInfo:
      return onPeerInfo(bytes);
    case ipc::FrameType::DeviceQuery:
      return onDeviceQuery(bytes);
    case ipc::FrameType::CommRoot:
      return onCommRoot(bytes);
    case ipc::FrameType::MemRegister:
      return onMemRegister(bytes, fds);
    case ipc::FrameType::MemUnregister:
      return onMemUnregister(bytes);
    case ipc::FrameType::CommArea:
      return onCommArea(bytes);
    default:
      return invalidArgument("frame type " + std::to_string(static_cast<int>(*type)) +
                             " is not a request");
  }
}

Status Session::onHello(std::span<const uint8_t> bytes, uint64_t defaultSegment,
                        uint64_t maxSegment, uint32_t ringEntries) {
  auto hello = ipc::frameAs<ipc::HelloFrame>(bytes);
  name_ = printableName(hello.clientName, sizeof(hello.clientName));
  uint64_t want = hello.segmentBytes == 0 ? defaultSegment : hello.segmentBytes;
  if (want > maxSegment) {
    return invalidArgument("requested segment of " + std::to_string(want) +
                           " bytes exceeds the daemon's max_segment_bytes " +
                           std::to_string(maxSegment));
  }
  ipc::SegmentLayout layout = ipc::segmentLayout(0, ringEntries);
  want = pageUp(std::max(want, layout.heapOffset + kMinHeapBytes));
  std::string memfdName = "hetero-comm-client-" + std::to_string(id_);
  auto seg = Segment::create(want, ringEntries, memfdName.c_str());
  if (!seg.isOk()) return seg.status();
  eventFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!eventFd_.valid()) return systemError("eventfd", errno);
  segment_ = std::move(seg.value());
  const auto& l = segment_->layout();
  allocator_ = std::make_unique<SegmentAllocator>(l.heapOffset, l.heapBytes);

  auto w = ipc::makeFrame<ipc::WelcomeFrame>(ipc::FrameType::Welcome, hello.header.requestId);
  w.minor = ipc::kProtocolMinor;
  w.clientId = id_;
  w.segmentBytes = segment_->bytes();
  w.ringEntries = ringEntries;
  w.daemonPid = static_cast<uint32_t>(::getpid());
  w.submitOffset = l.submitOffset;
  w.completionOffset = l.completionOffset;
  w.heapOffset = l.heapOffset;
  w.heapBytes = l.heapBytes;
  int fds[2] = {segment_->fd(), eventFd_.get()};
  spdlog::info("{} connected: uid {}, name '{}', segment {} MiB", describe(), peer_.uid, name_,
               segment_->bytes() >> 20);
  return sendMessage(socket_.get(), ipc::frameBytes(w), fds);
}

Status Session::onMemAlloc(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::MemAllocFrame>(bytes);
  auto offset = allocator_->allocate(req.bytes);
  if (!offset.isOk()) {
    return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, offset.status())));
  }
  uint64_t size = allocator_->sizeAt(*offset);
  if (prefaulter_ == nullptr) {
    segment_->prefault(*offset, size);
  } else if (!prefaulter_->submit(segment_, *offset, size)) {
    spdlog::debug("{}: {} bytes at {} not pre-faulted (the pre-fault queue is full)", describe(),
                  size, *offset);
  }
  auto r =
      ipc::makeFrame<ipc::MemAllocReplyFrame>(ipc::FrameType::MemAllocReply, req.header.requestId);
  r.offset = *offset;
  r.bytes = size;
  return reply(ipc::frameBytes(r));
}

Status Session::onMemFree(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::MemFreeFrame>(bytes);
  Status s = allocator_->free(req.offset);
  if (!s.isOk()) return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, s)));
  return reply(ipc::frameBytes(
      ipc::makeFrame<ipc::MemFreeReplyFrame>(ipc::FrameType::MemFreeReply, req.header.requestId)));
}

Status Session::onCmaProbe(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds) {
  auto req = ipc::frameAs<ipc::CmaProbeFrame>(bytes);
  Status outcome = okStatus();
  if (!cmaAllowed_) {
    outcome = unavailable(
        "cross-memory attach is off in the daemon's configuration "
        "(session.cross_memory_attach)");
  } else {
    // validateFrame let the probe in with exactly one descriptor, which the client says is its
    // /proc/self/mem; attach() checks that. The caller closes the received one.
    UniqueFd memFd(::fcntl(fds[0].get(), F_DUPFD_CLOEXEC, 0));
    auto pm = memFd.valid()
                  ? ProcessMemory::attach(std::move(memFd), peer_.pid, req.address, req.pattern)
                  : Result<std::unique_ptr<ProcessMemory>>(
                        systemError("dup of the probe's descriptor", errno));
    if (pm.isOk()) {
      processMemory_ = std::move(pm.value());
    } else {
      outcome = pm.status();
    }
  }
  if (outcome.isOk()) {
    spdlog::info("{}: cross-memory attach enabled", describe());
  } else {
    spdlog::info("{}: cross-memory attach not available: {}", describe(), outcome.message());
  }
  auto r =
      ipc::makeFrame<ipc::CmaProbeReplyFrame>(ipc::FrameType::CmaProbeReply, req.header.requestId);
  r.status = static_cast<int32_t>(outcome.code());
  ipc::copyText(r.message, outcome.message());
  return reply(ipc::frameBytes(r));
}

Status Session::onPeerInfo(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::PeerInfoFrame>(bytes);
  auto r =
      ipc::makeFrame<ipc::PeerInfoReplyFrame>(ipc::FrameType::PeerInfoReply, req.header.requestId);
  ipc::copyText(r.address, peerAddress_);
  return reply(ipc::frameBytes(r));
}

Status Session::onDeviceQuery(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::DeviceQueryFrame>(bytes);
  std::vector<ipc::DeviceEntry> entries;
  if (deviceEntries_) entries = deviceEntries_();
  // The protocol's bound (a client refuses more); no node comes near it.
  if (entries.size() > ipc::kMaxDeviceEntries) entries.resize(ipc::kMaxDeviceEntries);
  // Index 0 is answered on a node without GPUs too: it is how a client learns the total.
  if (req.index >= entries.size() && !(entries.empty() && req.index == 0)) {
    Status s = invalidArgument("device index " + std::to_string(req.index) +
                               " is out of range (the node has " + std::to_string(entries.size()) +
                               " GPUs)");
    return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, s)));
  }
  auto r = ipc::makeFrame<ipc::DeviceQueryReplyFrame>(ipc::FrameType::DeviceQueryReply,
                                                      req.header.requestId);
  r.total = static_cast<uint32_t>(entries.size());
  r.index = req.index;
  if (!entries.empty()) r.device = entries[req.index];
  return reply(ipc::frameBytes(r));
}

Status Session::onCommArea(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::CommAreaFrame>(bytes);
  const Member* m = member(req.commHandle);
  if (m == nullptr) {
    Status s = invalidArgument("CommArea names handle " + std::to_string(req.commHandle) +
                               ", which this client does not hold");
    return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, s)));
  }
  auto r =
      ipc::makeFrame<ipc::CommAreaReplyFrame>(ipc::FrameType::CommAreaReply, req.header.requestId);
  r.rank = m->rank;
  r.nranks = static_cast<uint32_t>(m->comm->nranks());
  const std::shared_ptr<SmallArea>& area = m->comm->smallArea();
  if (!area) return reply(ipc::frameBytes(r));
  r.present = 1;
  r.bytes = area->bytes();
  int fds[1] = {area->fd()};
  return sendMessage(socket_.get(), ipc::frameBytes(r), fds);
}

Status Session::onCommRoot(std::span<const uint8_t> bytes) {
  // Bounded: a client names a root just before each CommInit, which takes it.
  constexpr size_t kMaxPendingRoots = 1024;
  auto req = ipc::frameAs<ipc::CommRootFrame>(bytes);
  std::array<uint8_t, 16> key;
  std::memcpy(key.data(), req.key, key.size());
  Status s = okStatus();
  if (req.address[0] == '\0') {
    s = invalidArgument("CommRoot names no address");
  } else if (commRoots_.size() >= kMaxPendingRoots && commRoots_.count(key) == 0) {
    s = Status{Code::NoResource, "more than " + std::to_string(kMaxPendingRoots) +
                                     " communicator roots named without a CommInit"};
  }
  if (!s.isOk()) return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, s)));
  NamedRoot& named = commRoots_[key];
  // Another address than before: the ranks' joins disagree, and the root says so.
  named.address = req.address;
  // Saturates: one CommInit per rank takes one naming, and no client holds 2^32 ranks.
  if (named.pending < UINT32_MAX) ++named.pending;
  return reply(ipc::frameBytes(ipc::makeFrame<ipc::CommRootReplyFrame>(
      ipc::FrameType::CommRootReply, req.header.requestId)));
}

std::string Session::takeCommRoot(const uint8_t (&key)[16]) {
  std::array<uint8_t, 16> k;
  std::memcpy(k.data(), key, k.size());
  auto it = commRoots_.find(k);
  if (it == commRoots_.end()) return {};
  std::string root = it->second.address;
  if (--it->second.pending == 0) commRoots_.erase(it);
  return root;
}

Status Session::onMemRegister(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds) {
  auto req = ipc::frameAs<ipc::MemRegisterFrame>(bytes);
  Result<uint32_t> region = invalidArgument("this daemon has no devices");
  if (devices_ != nullptr) region = regions_.add(req, fds.empty() ? -1 : fds[0].get(), *devices_);
  if (!region.isOk()) {
    spdlog::info("{}: device allocation {} not registered: {}", describe(), req.allocationId,
                 region.status().message());
    return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, region.status())));
  }
  spdlog::debug("{}: {}", describe(), regions_.find(*region)->describe());
  auto r = ipc::makeFrame<ipc::MemRegisterReplyFrame>(ipc::FrameType::MemRegisterReply,
                                                      req.header.requestId);
  r.region = *region;
  return reply(ipc::frameBytes(r));
}

Status Session::onMemUnregister(std::span<const uint8_t> bytes) {
  auto req = ipc::frameAs<ipc::MemUnregisterFrame>(bytes);
  Status s = regions_.remove(req.region);
  if (!s.isOk()) return reply(ipc::frameBytes(ipc::makeErrorFrame(req.header.requestId, s)));
  return reply(ipc::frameBytes(ipc::makeFrame<ipc::MemUnregisterReplyFrame>(
      ipc::FrameType::MemUnregisterReply, req.header.requestId)));
}

Status Session::trackDoneFlag(uint64_t requestId, uint64_t offset) {
  if (offset % alignof(ipc::DoneFlag) != 0 ||
      !allocator_->contains(offset, sizeof(ipc::DoneFlag))) {
    return invalidArgument("done flag at segment offset " + std::to_string(offset) +
                           " is not an aligned word inside an allocation of the segment");
  }
  doneFlags_[requestId] = offset;
  return okStatus();
}

void Session::setDoneFlag(uint64_t requestId, const Status& status) {
  auto it = doneFlags_.find(requestId);
  if (it == doneFlags_.end()) return;
  auto* flag = reinterpret_cast<ipc::DoneFlag*>(segment_->at(it->second));
  doneFlags_.erase(it);
  ipc::signalDone(flag, static_cast<int32_t>(status.code()));
}

Status Session::reply(std::span<const uint8_t> frame) { return sendMessage(socket_.get(), frame); }

ipc::PopResult Session::popSubmission(ipc::SubmitEntry* out) {
  if (!segment_) return ipc::PopResult::Empty;
  return segment_->view().submit.pop(out);
}

void Session::complete(uint64_t requestId, const Status& status, uint64_t value, int32_t rank,
                       int32_t nranks) {
  if (!segment_) return;
  if (inFlight > 0) --inFlight;
  ipc::CompletionEntry e{};
  e.requestId = requestId;
  e.status = static_cast<int32_t>(status.code());
  e.value = value;
  e.rank = rank;
  e.nranks = nranks;
  ipc::copyText(e.message, status.message());
  setDoneFlag(requestId, status);
  if (!overflow_.empty() || !segment_->view().completion.push(e)) {
    overflow_.push_back(e);
    return;
  }
  ipc::wakeClientIfSleeping(segment_->view().header);
}

void Session::flushCompletions() {
  bool pushed = false;
  while (!overflow_.empty() && segment_->view().completion.push(overflow_.front())) {
    overflow_.pop_front();
    pushed = true;
  }
  if (pushed) ipc::wakeClientIfSleeping(segment_->view().header);
}

uint64_t Session::addMember(Member m) {
  uint64_t h = nextHandle_++;
  members_.emplace(h, std::move(m));
  return h;
}

Member* Session::member(uint64_t handle) {
  auto it = members_.find(handle);
  return it == members_.end() ? nullptr : &it->second;
}

}  // namespace hc::session
