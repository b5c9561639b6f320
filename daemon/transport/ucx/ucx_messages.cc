// UcxTransportImpl: posting sends and receives, matching them, and their completion.
#include <spdlog/spdlog.h>

#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "daemon/transport/ucx/ucx_status.h"
#include "daemon/transport/ucx/ucx_transport_impl.h"

namespace hc::transport::ucx {
namespace {

// Zero-byte receives that drop a message still want a buffer address.
uint8_t dropSink;

std::string describe(PeerId peer, const Tag& tag) {
  return "peer " + std::to_string(peer) + " tag " + tagString(tag);
}

Status truncated(uint64_t message, size_t buffer, PeerId peer, const Tag& tag) {
  return Status(Code::TransportError, "message of " + std::to_string(message) + " B from " +
                                          describe(peer, tag) + " is longer than the " +
                                          std::to_string(buffer) + " B receive buffer");
}

ucs_memory_type_t ucsMemoryType(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Cuda:
      return UCS_MEMORY_TYPE_CUDA;
    case MemoryKind::Rocm:
      return UCS_MEMORY_TYPE_ROCM;
    case MemoryKind::Host:
      break;
  }
  return UCS_MEMORY_TYPE_HOST;
}

// Names the buffer's memory type, so UCX need not detect it (and its memory-type cache is not
// the only thing between a device pointer and a CPU access).
void withMemoryType(ucp_request_param_t& param, MemoryKind kind) {
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.memory_type = ucsMemoryType(kind);
}

ucp_request_param_t contiguous() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  return param;
}

}  // namespace

// ---- posting ----------------------------------------------------------------------------------

bool UcxTransportImpl::movesMemory(MemoryKind kind) const {
  return kind == MemoryKind::Host || (worker_->memoryTypes() & (1ull << ucsMemoryType(kind))) != 0;
}

Status UcxTransportImpl::checkMemory(MemoryKind kind) const {
  if (movesMemory(kind)) return okStatus();
  return invalidArgument(std::string("this UCX (") + ucp_get_version_string() + ") moves no " +
                         memoryKindName(kind) + " memory: it was built without that memory type");
}

UcxTransportImpl::Request& UcxTransportImpl::addRequest(Request::Kind kind, PeerId peer, Tag tag,
                                                        void* buf, size_t bytes) {
  auto request = std::make_unique<Request>();
  request->owner = this;
  request->id = nextRequest_++;
  request->kind = kind;
  request->peer = peer;
  request->tag = tag;
  request->buf = buf;
  request->capacity = bytes;
  Request& added = *request;
  requests_.emplace(added.id, std::move(request));
  return added;
}

Result<RequestId> UcxTransportImpl::postSend(PeerId peer, Tag tag, const void* buf, size_t bytes,
                                             MemoryKind kind) {
  if (buf == nullptr && bytes > 0) return invalidArgument("postSend: null buffer");
  HC_RETURN_IF_ERROR(checkMemory(kind));
  HC_RETURN_IF_ERROR(checkPostable(peer));
  Peer& to = *peers_.at(peer);
  // UCX only reads a send's buffer; the one pointer type serves both directions.
  Request& request = addRequest(Request::Kind::Send, peer, tag, const_cast<void*>(buf), bytes);
  request.memory = kind;
  if (!to.stamp || !to.held.empty()) {
    to.held.push_back(request.id);  // until its hello arrives, in post order
  } else {
    issueSend(to, request);
  }
  return request.id;
}

void UcxTransportImpl::issueSend(Peer& peer, Request& request) {
  const uint64_t sequence = peer.nextSequence++;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransportImpl::onSendDone;
  param.user_data = &request;
  ucs_status_ptr_t result;
  if (request.capacity <= options_.inlineBytes && request.memory == MemoryKind::Host) {
    // One UCX message: the header, then the payload gathered from the caller's buffer.
    request.header = makeHeader(ControlKind::Inline, request.tag, request.capacity, peer.secret);
    request.iov[0] = {&request.header, sizeof(MessageHeader)};
    request.iov[1] = {request.buf, request.capacity};
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_iov();
    result = ucp_tag_send_nbx(peer.ep, request.iov, request.capacity > 0 ? 2 : 1,
                              controlTag(*peer.stamp, sequence), &param);
  } else {
    // The header, then the payload as its own message: the receiver takes it by UCX's
    // rendezvous straight into the posted buffer once the header has matched.
    request.header = makeHeader(ControlKind::Header, request.tag, request.capacity, peer.secret);
    std::vector<uint8_t> header(sizeof(MessageHeader));
    std::memcpy(header.data(), &request.header, sizeof(MessageHeader));
    sendInternal(peer.ep, controlTag(*peer.stamp, sequence), std::move(header));
    withMemoryType(param, request.memory);
    result = ucp_tag_send_nbx(peer.ep, request.buf, request.capacity,
                              dataTag(*peer.stamp, sequence), &param);
  }
  if (result == nullptr) {
    finish(request, okStatus(), request.capacity);  // the payload is already out of the buffer
  } else {
    track(request, result, "ucp_tag_send_nbx");
  }
}

Result<RequestId> UcxTransportImpl::postRecv(PeerId peer, Tag tag, void* buf, size_t bytes,
                                             MemoryKind kind) {
  if (buf == nullptr && bytes > 0) return invalidArgument("postRecv: null buffer");
  HC_RETURN_IF_ERROR(checkMemory(kind));
  HC_RETURN_IF_ERROR(checkPostable(peer));
  Request& request = addRequest(Request::Kind::Recv, peer, tag, buf, bytes);
  request.memory = kind;
  const MatchKey key{peer, tag};
  auto arrived = unexpected_.find(key);
  if (arrived == unexpected_.end()) {
    posted_[key].push_back(request.id);
    return request.id;
  }
  // The message came first: take the oldest one with this key.
  Arrival arrival = std::move(arrived->second.front());
  arrived->second.pop_front();
  if (arrived->second.empty()) unexpected_.erase(arrived);
  deliver(request, arrival);
  return request.id;
}

void UcxTransportImpl::deliver(Request& request, Arrival& arrival) {
  if (arrival.bytes > request.capacity) {
    finish(request, truncated(arrival.bytes, request.capacity, request.peer, request.tag));
    if (!arrival.isInline) drainData(request.peer, arrival.sequence);
    return;
  }
  if (arrival.isInline && arrival.bytes > 0 && request.memory != MemoryKind::Host) {
    // The payload sits in our header buffer; only a CPU copy could move it, and the CPU cannot
    // write device memory. Senders of device memory never inline; a host send this short
    // should have met a staged receive (directMinBytes()).
    finish(request,
           Status(Code::TransportError, "a message of " + std::to_string(arrival.bytes) +
                                            " B arrived inline, which cannot land in " +
                                            memoryKindName(request.memory) + " memory (at least " +
                                            std::to_string(directMinBytes()) + " B go direct)"));
    return;
  }
  if (arrival.isInline) {
    if (arrival.bytes > 0) {
      std::memcpy(request.buf, arrival.control.data() + arrival.payloadAt, arrival.bytes);
    }
    finish(request, okStatus(), arrival.bytes);
    return;
  }
  ucp_request_param_t param = contiguous();
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  withMemoryType(param, request.memory);
  param.cb.recv = &UcxTransportImpl::onRecvDone;
  param.user_data = &request;
  // The sender stamped its data with our id for it, which is the request's peer. The data may
  // have been taken out of UCX already (dropUnannouncedData()); else it is received by its tag.
  ucs_status_ptr_t result;
  if (ucp_tag_message_h message = takeAnnounced(request.peer, arrival.sequence)) {
    result = ucp_tag_msg_recv_nbx(worker_->get(), request.buf, arrival.bytes, message, &param);
  } else {
    result = ucp_tag_recv_nbx(worker_->get(), request.buf, arrival.bytes,
                              dataTag(request.peer, arrival.sequence), kFullMask, &param);
  }
  if (result == nullptr) {
    // Done at once: UCX 1.13 leaves recv_info unfilled then. The data message is as long as its
    // header said (a longer one would have failed as truncated).
    finish(request, okStatus(), arrival.bytes);
  } else {
    track(request, result, "ucp_tag_recv_nbx");
  }
}

// ---- completion -------------------------------------------------------------------------------

void UcxTransportImpl::track(Request& request, ucs_status_ptr_t result, const char* what) {
  // UCX may run the callback before the call returns (a rendezvous with an endpoint that just
  // failed ends at once): the request is final then, and the handle already released.
  if (request.state != Request::State::Waiting) return;
  if (UCS_PTR_IS_ERR(result)) {
    finish(request, ucsStatus(UCS_PTR_STATUS(result), what));
    return;
  }
  request.ucx = result;
  request.state = Request::State::InFlight;
}

void UcxTransportImpl::finish(Request& request, Status status, size_t bytes) {
  HC_CHECK(request.state == Request::State::Waiting || request.state == Request::State::InFlight);
  request.state = Request::State::Ready;
  request.status = std::move(status);
  request.bytes = request.status.isOk() ? bytes : 0;
  ready_.push_back(request.id);
  if (!inProgress_) signalWake();
}

void UcxTransportImpl::onSendDone(void* ucxRequest, ucs_status_t status, void* user) {
  auto* request = static_cast<Request*>(user);
  request->owner->completeFromUcx(*request, ucxRequest, status, request->capacity);
}

void UcxTransportImpl::onRecvDone(void* ucxRequest, ucs_status_t status,
                                  const ucp_tag_recv_info_t* info, void* user) {
  auto* request = static_cast<Request*>(user);
  request->owner->completeFromUcx(*request, ucxRequest, status,
                                  status == UCS_OK ? info->length : 0);
}

void UcxTransportImpl::completeFromUcx(Request& request, void* ucxRequest, ucs_status_t status,
                                       size_t bytes) {
  ucp_request_free(ucxRequest);
  request.ucx = nullptr;
  Status result;
  if (request.detached) {
    result = *request.detached;
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    // Our header announced a length that fit; the data message disagreed with it.
    result = Status(Code::TransportError, "data from " + describe(request.peer, request.tag) +
                                              " is longer than its header announced");
  } else {
    const char* what = request.kind == Request::Kind::Send ? "send to " : "receive from ";
    result = ucsStatus(status, what + describe(request.peer, request.tag));
  }
  finish(request, std::move(result), bytes);
}

Result<bool> UcxTransportImpl::test(RequestId id, size_t* bytes) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return notFound("unknown request " + std::to_string(id));
  if (it->second->state != Request::State::Done) return false;
  Status status = std::move(it->second->status);
  const size_t moved = it->second->bytes;
  requests_.erase(it);
  if (!status.isOk()) return status;
  if (bytes != nullptr) *bytes = moved;
  return true;
}

Status UcxTransportImpl::cancel(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return notFound("unknown request " + std::to_string(id));
  Request& request = *it->second;
  if (request.state != Request::State::Waiting) return okStatus();  // matched or sent: too late
  if (request.kind == Request::Kind::Send) {
    std::erase(peers_.at(request.peer)->held, id);
  } else {
    auto queue = posted_.find(MatchKey{request.peer, request.tag});
    std::erase(queue->second, id);
    if (queue->second.empty()) posted_.erase(queue);
  }
  finish(request, unavailable("cancelled"));
  return okStatus();
}

// ---- dropping ---------------------------------------------------------------------------------

size_t UcxTransportImpl::dropUnexpected(const std::function<bool(const UnexpectedMessage&)>& drop) {
  pumpControl();  // what UCX has received counts as arrived
  size_t dropped = 0;
  for (auto entry = unexpected_.begin(); entry != unexpected_.end();) {
    const MatchKey& key = entry->first;
    // Each queue is oldest first; what is kept keeps its order.
    std::deque<Arrival> kept;
    for (Arrival& arrival : entry->second) {
      if (!drop(UnexpectedMessage{key.peer, key.tag, arrival.bytes, arrival.arrived})) {
        kept.push_back(std::move(arrival));
        continue;
      }
      // A payload still in UCX is received into nothing, which releases its sender.
      if (!arrival.isInline) drainData(key.peer, arrival.sequence);
      ++dropped;
    }
    if (kept.empty()) {
      entry = unexpected_.erase(entry);
    } else {
      entry->second = std::move(kept);
      ++entry;
    }
  }
  return dropped;
}

void UcxTransportImpl::drainData(PeerId stamp, uint64_t sequence) {
  // A zero-byte receive: UCX ends it as truncated and, for a rendezvous, still releases the
  // sender.
  ucp_request_param_t param = contiguous();
  if (ucp_tag_message_h message = takeAnnounced(stamp, sequence)) {
    keepInternal(ucp_tag_msg_recv_nbx(worker_->get(), &dropSink, 0, message, &param), {});
    return;
  }
  keepInternal(
      ucp_tag_recv_nbx(worker_->get(), &dropSink, 0, dataTag(stamp, sequence), kFullMask, &param),
      {}, stamp);
}

ucp_tag_message_h UcxTransportImpl::takeAnnounced(PeerId stamp, uint64_t sequence) {
  auto it = announced_.find(dataTag(stamp, sequence));
  if (it == announced_.end()) return nullptr;
  ucp_tag_message_h message = it->second;
  announced_.erase(it);
  return message;
}

void UcxTransportImpl::dropArrivedData(PeerId stamp) {
  ucp_worker_h worker = worker_->get();
  ucp_request_param_t param = contiguous();
  std::erase_if(announced_, [&](const auto& entry) {
    if (stampOf(entry.first) != stamp) return false;
    if (entry.second != nullptr) {
      keepInternal(ucp_tag_msg_recv_nbx(worker, &dropSink, 0, entry.second, &param), {});
    }
    return true;
  });
  ucp_tag_recv_info_t info;
  while (ucp_tag_message_h message =
             ucp_tag_probe_nb(worker, dataTag(stamp, 0), kControlBit | kStampMask, 1, &info)) {
    keepInternal(ucp_tag_msg_recv_nbx(worker, &dropSink, 0, message, &param), {});
  }
}

void UcxTransportImpl::sendInternal(ucp_ep_h ep, uint64_t ucxTag, std::vector<uint8_t> storage) {
  ucp_request_param_t param = contiguous();
  // Post before handing the storage over: the by-value parameter would otherwise be moved into
  // first (argument evaluation order is unspecified).
  ucs_status_ptr_t result = ucp_tag_send_nbx(ep, storage.data(), storage.size(), ucxTag, &param);
  keepInternal(result, std::move(storage));
}

void UcxTransportImpl::keepInternal(ucs_status_ptr_t result, std::vector<uint8_t> storage,
                                    PeerId drainFrom) {
  if (result == nullptr) return;  // done already
  if (UCS_PTR_IS_ERR(result)) {
    // A failed endpoint also reaches onEndpointError, which is where it is handled and logged.
    spdlog::debug("ucx: internal request failed: {}", ucs_status_string(UCS_PTR_STATUS(result)));
    return;
  }
  // Moving the vector keeps its heap buffer where UCX reads it.
  internalOps_.push_back(InternalOp{result, std::move(storage), drainFrom});
}

}  // namespace hc::transport::ucx
