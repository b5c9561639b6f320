// UcxTransportImpl: progress(), the control-message inbox, hellos, what strangers send (the
// bounds and the proof are explained in ucx_wire.h, "Strangers" and "Proof"), and the wakeup fd.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "daemon/transport/ucx/ucx_status.h"
#include "daemon/transport/ucx/ucx_transport_impl.h"

namespace hc::transport::ucx {
namespace {

// One progress() call runs at most this many rounds of (drain the worker, handle what came,
// try to arm), and drains the worker at most kMaxSpins times per round: under a steady stream of
// events it returns rather than spin, and leaves the fd readable so the owner comes back.
constexpr int kMaxRounds = 4;
constexpr int kMaxSpins = 16;

// Zero-byte receives that drop a message still want a buffer address.
uint8_t dropSink;

// How often progress() looks for data messages that no header announced. Between two looks UCX
// holds at most what arrives meanwhile.
constexpr auto kStraySweepInterval = std::chrono::milliseconds(1);

// How long a control message still arriving may hold back the later ones under its stamp. A
// daemon's headers (56 bytes) arrive whole; only an inline message sent by rendezvous can take a
// while, and a daemon serves its rendezvous at once. A stranger that guesses a live stamp and
// never serves one would otherwise stop that peer's messages for good.
constexpr auto kHoldBackLimit = std::chrono::seconds(1);

}  // namespace

template <typename Describe>
void UcxTransportImpl::refuse(RefusalCounter& counter, Describe&& describe) {
  if (!counter.count(std::chrono::steady_clock::now())) return;
  if (counter.unlogged() == 0) {
    spdlog::warn("ucx: {}", describe());
  } else {
    spdlog::warn("ucx: {} ({} more like it since the last report)", describe(), counter.unlogged());
  }
}

size_t UcxTransportImpl::progress() {
  // Drain our own wakeup first: whatever finishes after this read signals again.
  uint64_t counter;
  (void)!::read(wakeFd_.get(), &counter, sizeof(counter));
  wakePending_ = false;
  inProgress_ = true;
  bool sweep = false;
  if (const auto now = std::chrono::steady_clock::now(); now >= nextStraySweep_) {
    sweep = true;
    nextStraySweep_ = now + kStraySweepInterval;
  }
  ucp_worker_h worker = worker_->get();
  bool armed = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    unsigned events = 0;
    for (int spin = 0; spin < kMaxSpins; ++spin) {
      const unsigned found = ucp_worker_progress(worker);
      if (found == 0) break;
      events += found;
    }
    pumpControl();
    if (std::exchange(sweep, false)) {
      // Right after pumpControl(), with no worker progress between: a data message UCX holds
      // now came after its header, which pumpControl() has taken. Early in the rounds, so that
      // the later ones progress the drops it posts.
      dropStrayData();
      dropUnannouncedData();
    }
    handleEndpointFailures();
    pollInternalOps();
    if (!ready_.empty() || !failureReports_.empty()) break;  // report now; the owner returns
    if (events > 0) continue;
    // Nothing left: arm, so that the worker's fd wakes the owner for the next event. BUSY means
    // events came in meanwhile.
    const ucs_status_t status = ucp_worker_arm(worker);
    if (status == UCS_OK) {
      armed = true;
      break;
    }
    if (status != UCS_ERR_BUSY) {
      logUcsFailure(ucsStatus(status, "ucp_worker_arm"));
      break;
    }
  }
  inProgress_ = false;

  std::vector<RequestId> ready = std::exchange(ready_, {});
  for (RequestId id : ready) requests_.at(id)->state = Request::State::Done;
  std::vector<std::pair<PeerId, Status>> failures = std::exchange(failureReports_, {});
  // Returning 0 tells the owner to sleep on eventFd(); without an armed worker, make sure the fd
  // wakes it at once instead.
  if (!armed && ready.empty() && failures.empty()) signalWake();
  if (!failures.empty() && handler_) {
    PeerFailureHandler handler = handler_;  // it may replace itself
    for (const auto& [peer, why] : failures) handler(peer, why);
  }
  return ready.size() + failures.size();
}

void UcxTransportImpl::signalWake() {
  if (wakePending_) return;
  uint64_t one = 1;
  // Only EAGAIN can fail here (the counter is saturated), and then the fd is readable anyway.
  (void)!::write(wakeFd_.get(), &one, sizeof(one));
  wakePending_ = true;
}

void UcxTransportImpl::pumpControl() {
  ucp_worker_h worker = worker_->get();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  ucp_tag_recv_info_t info;
  // Take every control message UCX holds, oldest first (a masked probe searches in arrival order).
  while (ucp_tag_message_h message = ucp_tag_probe_nb(worker, kControlBit, kControlBit, 1, &info)) {
    if (!admitControl(info.sender_tag, info.length)) {
      // Received into nothing: UCX ends it as truncated and releases its sender, and nothing was
      // allocated for the length it announced.
      keepInternal(ucp_tag_msg_recv_nbx(worker, &dropSink, 0, message, &param), {});
      continue;
    }
    InboxEntry& entry = inbox_.emplace_back();
    entry.ucxTag = info.sender_tag;
    entry.arrived = std::chrono::steady_clock::now();
    entry.bytes.resize(info.length);  // admitted: at most a header plus inlineBytes
    ucs_status_ptr_t result =
        ucp_tag_msg_recv_nbx(worker, entry.bytes.data(), info.length, message, &param);
    if (UCS_PTR_IS_ERR(result)) {
      entry.status = UCS_PTR_STATUS(result);
    } else {
      entry.ucx = result;  // null when it completed at once
    }
    if (entry.ucx == nullptr || stampOf(entry.ucxTag) != 0) continue;
    // A hello still arriving. A daemon sends its 16 bytes in one eager fragment, done on arrival;
    // only a sender that forces a rendezvous (and may never serve it) makes one wait. Keep a few,
    // and leave the rest to UCX unread: their buffers go when UCX lets go of them.
    if (hellosInFlight_ < kMaxHellosInFlight) {
      ++hellosInFlight_;
      continue;
    }
    refuse(refusals_.slowHellos, [&] {
      return fmt::format(
          "dropped a hello still incomplete on arrival (tag {:#x}): {} are being received already",
          info.sender_tag, hellosInFlight_);
    });
    keepInternal(entry.ucx, std::move(entry.bytes));
    inbox_.pop_back();
  }
  handleInbox();
}

bool UcxTransportImpl::admitControl(uint64_t ucxTag, size_t length) {
  const PeerId from = stampOf(ucxTag);
  if (from == 0) {  // a hello
    if (length == sizeof(HelloMessage)) return true;
    RefusalCounter& counter =
        length > sizeof(HelloMessage) ? refusals_.oversizedControl : refusals_.malformedControl;
    refuse(counter, [&] {
      return fmt::format("dropped unread a hello of {} B (tag {:#x}): a hello is {} B", length,
                         ucxTag, sizeof(HelloMessage));
    });
    return false;
  }
  auto peer = peers_.find(from);
  if (peer == peers_.end()) {
    refuse(refusals_.unknownStamp, [&] {
      return fmt::format(
          "dropped unread a control message of {} B stamped {} (tag {:#x}): no peer has that stamp",
          length, from, ucxTag);
    });
    return false;
  }
  if (peer->second->failed) {
    // Traffic of a peer that failed meanwhile: nobody may receive it, nor its data.
    dropArrivedData(from);
    return false;
  }
  const size_t limit = kMaxHeaderBytes + options_.inlineBytes;
  if (length <= limit) return true;
  refuse(refusals_.oversizedControl, [&] {
    return fmt::format(
        "dropped unread a control message of {} B stamped {} (tag {:#x}): no daemon sends one "
        "over {} B",
        length, from, ucxTag, limit);
  });
  return false;
}

void UcxTransportImpl::handleInbox() {
  // Each sender's messages are handled in its send order, which UCX keeps per endpoint. A message
  // still being received holds back only later ones under the same stamp: a peer that stalls in
  // the middle of a message, or a stranger that starts one and never finishes it, must not stop
  // everyone else's. Hellos (stamp 0) come one per endpoint and wait for nothing.
  std::vector<PeerId> busy;  // stamps with an unfinished message ahead
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < inbox_.size();) {
    InboxEntry& entry = inbox_[i];
    const PeerId from = stampOf(entry.ucxTag);
    const bool heldBack = from != 0 && std::find(busy.begin(), busy.end(), from) != busy.end();
    if (entry.ucx != nullptr) {
      const ucs_status_t status = ucp_request_check_status(entry.ucx);
      if (status == UCS_INPROGRESS) {
        if (from != 0 && !entry.stalled && now - entry.arrived >= kHoldBackLimit) {
          entry.stalled = true;
          refuse(refusals_.stalledControl, [&] {
            return fmt::format(
                "a control message stamped {} (tag {:#x}) is still arriving after {} ms: it no "
                "longer holds back later ones",
                from, entry.ucxTag,
                std::chrono::duration_cast<std::chrono::milliseconds>(now - entry.arrived).count());
          });
        }
        if (from != 0 && !heldBack && !entry.stalled) busy.push_back(from);
        ++i;
        continue;
      }
      ucp_request_free(entry.ucx);
      entry.ucx = nullptr;
      entry.status = status;
      if (from == 0) --hellosInFlight_;
    }
    if (heldBack) {
      ++i;
      continue;
    }
    InboxEntry done = std::move(entry);
    inbox_.erase(inbox_.begin() + static_cast<std::ptrdiff_t>(i));
    if (done.status == UCS_OK) {
      handleControl(done.ucxTag, std::move(done.bytes), done.arrived);
    } else {
      spdlog::debug("ucx: lost a control message: {}", ucs_status_string(done.status));
    }
  }
}

void UcxTransportImpl::handleControl(uint64_t ucxTag, std::vector<uint8_t> bytes,
                                     std::chrono::steady_clock::time_point arrived) {
  std::optional<ControlMessage> message = parseControl(bytes);
  const PeerId from = stampOf(ucxTag);
  // A hello travels under stamp 0 and nothing else does (admitControl() sized it as a hello).
  if (!message || (message->kind == ControlKind::Hello) != (from == 0)) {
    refuse(refusals_.malformedControl, [&] {
      return fmt::format("dropped a malformed control message ({} B, tag {:#x})", bytes.size(),
                         ucxTag);
    });
    return;
  }
  const bool isHello = message->kind == ControlKind::Hello;
  if (!sameSecret(isHello ? message->hello.secret : message->header.secret, secret_)) {
    // Not from a daemon that was handed our address in a rank table. A forged header's data, if
    // any follows, is announced by nothing and dropUnannouncedData() drops it.
    refuse(refusals_.unprovenControl, [&] {
      return fmt::format(
          "dropped a {} without this daemon's secret ({} B, tag {:#x}): not from a member of any "
          "of its communicators",
          isHello ? "hello" : "message", bytes.size(), ucxTag);
    });
    return;
  }
  if (isHello) {
    handleHello(message->hello);
    return;
  }
  const uint64_t sequence = sequenceOf(ucxTag);
  auto peer = peers_.find(from);
  if (peer == peers_.end() || peer->second->failed) {
    // Traffic of a peer that failed meanwhile: nobody may receive it.
    if (message->kind == ControlKind::Header) dropArrivedData(from);
    return;
  }
  const MatchKey key{from, tagOf(message->header)};
  Arrival arrival{.sequence = sequence,
                  .bytes = message->header.bytes,
                  .isInline = message->kind == ControlKind::Inline,
                  .control = std::move(bytes),
                  .payloadAt = message->header.headerBytes,
                  .arrived = arrived};
  auto waiting = posted_.find(key);
  if (waiting == posted_.end()) {
    if (!arrival.isInline) announced_.emplace(dataTag(from, sequence), nullptr);
    unexpected_[key].push_back(std::move(arrival));
    return;
  }
  const RequestId id = waiting->second.front();
  waiting->second.pop_front();
  if (waiting->second.empty()) posted_.erase(waiting);
  deliver(*requests_.at(id), arrival);
}

void UcxTransportImpl::handleHello(const HelloMessage& hello) {
  if (hello.stamp == 0 || hello.stamp > kMaxStamp || hello.uuid == 0) {
    refuse(refusals_.malformedControl, [&] {
      return fmt::format("dropped a hello naming endpoint {:#x} with stamp {}: out of range",
                         hello.uuid, hello.stamp);
    });
    return;
  }
  auto known = peerByUuid_.find(hello.uuid);
  if (known == peerByUuid_.end()) {
    // It connected first; connect() takes the stamp when we connect back.
    switch (pendingHellos_.add(hello.uuid, hello.stamp)) {
      case PendingHellos::Added::New:
        break;
      case PendingHellos::Added::NewEvicting:
        refuse(refusals_.evictedHellos, [&] {
          return fmt::format(
              "more than {} hellos of endpoints not connected yet: dropped the oldest (its "
              "daemon is asked again when we connect to it)",
              options_.maxPendingHellos);
        });
        break;
      case PendingHellos::Added::Repeated:
        refuse(refusals_.repeatedHellos, [&] {
          return fmt::format(
              "ignored a hello naming endpoint {:#x} with stamp {}: one from it is pending already",
              hello.uuid, hello.stamp);
        });
        break;
    }
    return;
  }
  Peer& peer = *peers_.at(known->second);
  if (peer.failed) return;
  if (!peer.stamp) {
    peer.stamp = hello.stamp;
    // Sends held for this hello go out now, in post order.
    for (RequestId id : std::exchange(peer.held, {})) issueSend(peer, *requests_.at(id));
  } else if (*peer.stamp != hello.stamp) {
    // A daemon sends one hello per endpoint, when it opens it, and keeps the endpoint for the
    // life of its transport; a restarted daemon is a new uuid, so a new Peer. A second hello
    // naming this uuid is therefore not its own (it answers kHelloWantsHello with the same
    // stamp): honouring it would send our traffic for this peer under a stamp it does not know.
    refuse(refusals_.repeatedHellos, [&] {
      return fmt::format(
          "ignored a hello naming peer {} (endpoint {:#x}) with stamp {}: its stamp is {}", peer.id,
          hello.uuid, hello.stamp, *peer.stamp);
    });
    return;
  }
  // It found no hello of ours when it connected: send ours again, once.
  if ((hello.flags & kHelloWantsHello) != 0 && !peer.helloResent && peer.ep != nullptr) {
    peer.helloResent = true;
    sendHello(peer);
  }
}

void UcxTransportImpl::dropStrayData() {
  ucp_worker_h worker = worker_->get();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  // One masked probe per aligned block of `count` stamps from `first` (count a power of two).
  auto sweep = [&](uint64_t first, uint64_t count) {
    const uint64_t mask = kControlBit | (kStampMask & ~((count - 1) << kStampShift));
    ucp_tag_recv_info_t info;
    while (ucp_tag_message_h message =
               ucp_tag_probe_nb(worker, dataTag(static_cast<PeerId>(first), 0), mask, 1, &info)) {
      refuse(refusals_.strayData, [&] {
        return fmt::format("dropped unread a data message of {} B stamped {}: no peer has it",
                           info.length, stampOf(info.sender_tag));
      });
      keepInternal(ucp_tag_msg_recv_nbx(worker, &dropSink, 0, message, &param), {});
    }
  };
  // The stamps never handed out: 0, and [nextPeer_, kMaxStamp] cut into at most 23 blocks.
  sweep(0, 1);
  const uint64_t end = uint64_t{kMaxStamp} + 1;
  for (uint64_t first = nextPeer_; first < end;) {
    uint64_t count = first & (~first + 1);  // the largest aligned block that starts here
    while (first + count > end) count >>= 1;
    sweep(first, count);
    first += count;
  }
}

void UcxTransportImpl::dropUnannouncedData() {
  ucp_worker_h worker = worker_->get();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  // A header still in the inbox may announce a data message UCX holds: its sender waits. A stalled
  // entry is no header (a daemon's arrive whole, kHoldBackLimit) and holds back nothing.
  std::vector<PeerId> waiting;
  for (const InboxEntry& entry : inbox_) {
    if (!entry.stalled) waiting.push_back(stampOf(entry.ucxTag));
  }
  for (const auto& [stamp, peer] : peers_) {
    if (peer->failed) continue;  // its data is dropped with it (handleEndpointFailures())
    const PeerId id = stamp;     // a copy: clang 14 cannot capture a structured binding
    if (std::find(waiting.begin(), waiting.end(), id) != waiting.end()) continue;
    ucp_tag_recv_info_t info;
    while (ucp_tag_message_h message =
               ucp_tag_probe_nb(worker, dataTag(id, 0), kControlBit | kStampMask, 1, &info)) {
      auto announced = announced_.find(info.sender_tag);
      if (announced != announced_.end() && announced->second == nullptr) {
        announced->second = message;  // its receive takes it (deliver(), drainData())
        continue;
      }
      refuse(refusals_.unannouncedData, [&] {
        return fmt::format(
            "dropped unread a data message of {} B stamped {} (tag {:#x}): no header of that peer "
            "announced it",
            info.length, id, info.sender_tag);
      });
      keepInternal(ucp_tag_msg_recv_nbx(worker, &dropSink, 0, message, &param), {});
    }
  }
}

size_t UcxTransportImpl::controlArriving() const {
  return static_cast<size_t>(std::count_if(inbox_.begin(), inbox_.end(),
                                           [](const InboxEntry& e) { return e.ucx != nullptr; }));
}

StrangerCounts UcxTransportImpl::strangerCounts() const {
  StrangerCounts counts;
  counts.oversizedControl = refusals_.oversizedControl.total();
  counts.unknownStamp = refusals_.unknownStamp.total();
  counts.malformedControl = refusals_.malformedControl.total();
  counts.unprovenControl = refusals_.unprovenControl.total();
  counts.repeatedHellos = refusals_.repeatedHellos.total();
  counts.evictedHellos = refusals_.evictedHellos.total();
  counts.slowHellos = refusals_.slowHellos.total();
  counts.strayData = refusals_.strayData.total();
  counts.unannouncedData = refusals_.unannouncedData.total();
  counts.stalledControl = refusals_.stalledControl.total();
  return counts;
}

void UcxTransportImpl::pollInternalOps() {
  std::erase_if(internalOps_, [](const InternalOp& op) {
    if (ucp_request_check_status(op.ucx) == UCS_INPROGRESS) return false;
    ucp_request_free(op.ucx);
    return true;
  });
}

}  // namespace hc::transport::ucx
