// UcxTransportImpl: progress(), the control-message inbox, and the wakeup fd.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "daemon/transport/ucx/ucx_status.h"
#include "daemon/transport/ucx/ucx_transport_impl.h"

namespace hc::transport::ucx {
namespace {

// One progress() call runs at most this many rounds of (drain the worker, handle what came,
// try to arm), and drains the worker at most kMaxSpins times per round: under a steady stream of
// events it returns rather than spin, and leaves the fd readable so the owner comes back.
constexpr int kMaxRounds = 4;
constexpr int kMaxSpins = 16;

}  // namespace

size_t UcxTransportImpl::progress() {
  // Drain our own wakeup first: whatever finishes after this read signals again.
  uint64_t counter;
  (void)!::read(wakeFd_.get(), &counter, sizeof(counter));
  wakePending_ = false;
  inProgress_ = true;
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
    InboxEntry& entry = inbox_.emplace_back();
    entry.ucxTag = info.sender_tag;
    entry.arrived = std::chrono::steady_clock::now();
    entry.bytes.resize(info.length);
    ucs_status_ptr_t result =
        ucp_tag_msg_recv_nbx(worker, entry.bytes.data(), info.length, message, &param);
    if (UCS_PTR_IS_ERR(result)) {
      entry.status = UCS_PTR_STATUS(result);
    } else {
      entry.ucx = result;  // null when it completed at once
    }
  }
  // Handle them in arrival order: that keeps one sender's messages in its send order.
  while (!inbox_.empty()) {
    InboxEntry& front = inbox_.front();
    if (front.ucx != nullptr) {
      const ucs_status_t status = ucp_request_check_status(front.ucx);
      if (status == UCS_INPROGRESS) break;
      ucp_request_free(front.ucx);
      front.ucx = nullptr;
      front.status = status;
    }
    InboxEntry entry = std::move(front);
    inbox_.pop_front();
    if (entry.status == UCS_OK) {
      handleControl(entry.ucxTag, std::move(entry.bytes), entry.arrived);
    } else {
      spdlog::debug("ucx: lost a control message: {}", ucs_status_string(entry.status));
    }
  }
}

void UcxTransportImpl::handleControl(uint64_t ucxTag, std::vector<uint8_t> bytes,
                                     std::chrono::steady_clock::time_point arrived) {
  std::optional<ControlMessage> message = parseControl(bytes);
  if (!message) {
    spdlog::warn("ucx: dropped a malformed control message ({} B, tag {:#x})", bytes.size(),
                 ucxTag);
    return;
  }
  if (message->kind == ControlKind::Hello) {
    handleHello(message->hello);
    return;
  }
  const PeerId from = stampOf(ucxTag);
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
    unexpected_[key].push_back(std::move(arrival));
    return;
  }
  const RequestId id = waiting->second.front();
  waiting->second.pop_front();
  if (waiting->second.empty()) posted_.erase(waiting);
  deliver(*requests_.at(id), arrival);
}

void UcxTransportImpl::handleHello(const HelloMessage& hello) {
  auto known = peerByUuid_.find(hello.uuid);
  if (known == peerByUuid_.end()) {
    strangerHellos_[hello.uuid] = hello.stamp;  // it connected first; we will connect back
    return;
  }
  Peer& peer = *peers_.at(known->second);
  if (peer.failed) return;
  peer.stamp = hello.stamp;
  // Sends held for this hello go out now, in post order.
  for (RequestId id : std::exchange(peer.held, {})) issueSend(peer, *requests_.at(id));
}

void UcxTransportImpl::pollInternalOps() {
  std::erase_if(internalOps_, [](const InternalOp& op) {
    if (ucp_request_check_status(op.ucx) == UCS_INPROGRESS) return false;
    ucp_request_free(op.ucx);
    return true;
  });
}

}  // namespace hc::transport::ucx
