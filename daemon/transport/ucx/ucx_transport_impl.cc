// UcxTransportImpl: creation and teardown, connections, and peer failures.
#include "daemon/transport/ucx/ucx_transport_impl.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <span>
#include <string>

#include "daemon/transport/ucx/ucx_status.h"

namespace hc::transport {

std::chrono::milliseconds maxSleep(const UcxOptions& options) {
  return std::max(options.keepaliveInterval / 2, std::chrono::milliseconds(1));
}

std::string ucxVersion() { return ucp_get_version_string(); }

Result<std::unique_ptr<Transport>> createUcxTransport(const UcxOptions& options) {
  Result<std::unique_ptr<ucx::UcxTransportImpl>> transport = ucx::UcxTransportImpl::create(options);
  if (!transport.isOk()) return transport.status();
  return std::unique_ptr<Transport>(std::move(transport.value()));
}

}  // namespace hc::transport

namespace hc::transport::ucx {
namespace {

uint64_t randomUuid() {
  std::random_device random;
  uint64_t uuid = 0;
  while (uuid == 0) uuid = (uint64_t{random()} << 32) ^ random();
  return uuid;
}

// Fills `out` from the kernel's CSPRNG (getrandom(2)), which blocks only before the pool was first
// seeded at boot.
Status fillRandom(std::span<uint8_t> out) {
  size_t filled = 0;
  while (filled < out.size()) {
    const ssize_t got = ::getrandom(out.data() + filled, out.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return systemError("ucx: getrandom", errno);
    }
    filled += static_cast<size_t>(got);
  }
  return okStatus();
}

Status addToEpoll(int epollFd, int fd) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &event) != 0) {
    return systemError("ucx: epoll_ctl", errno);
  }
  return okStatus();
}

}  // namespace

// ---- creation and teardown --------------------------------------------------------------------

Result<std::unique_ptr<UcxTransportImpl>> UcxTransportImpl::create(const UcxOptions& options) {
  if (options.maxPendingHellos == 0) {
    return invalidArgument("ucx: maxPendingHellos must be positive");
  }
  Result<std::unique_ptr<UcxWorker>> worker = UcxWorker::create(options);
  if (!worker.isOk()) return worker.status();
  UniqueFd wakeFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wakeFd.valid()) return systemError("ucx: eventfd", errno);
  UniqueFd epollFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epollFd.valid()) return systemError("ucx: epoll_create1", errno);
  HC_RETURN_IF_ERROR(addToEpoll(epollFd.get(), (*worker)->eventFd()));
  HC_RETURN_IF_ERROR(addToEpoll(epollFd.get(), wakeFd.get()));
  Secret secret;
  HC_RETURN_IF_ERROR(fillRandom(secret));
  return std::unique_ptr<UcxTransportImpl>(
      new UcxTransportImpl(options, std::move(worker.value()), randomUuid(), secret,
                           std::move(epollFd), std::move(wakeFd)));
}

UcxTransportImpl::UcxTransportImpl(const UcxOptions& options, std::unique_ptr<UcxWorker> worker,
                                   uint64_t uuid, const Secret& secret, UniqueFd epollFd,
                                   UniqueFd wakeFd)
    : options_(options),
      worker_(std::move(worker)),
      uuid_(uuid),
      secret_(secret),
      address_(encodeAddress(uuid, secret, worker_->address())),
      epollFd_(std::move(epollFd)),
      wakeFd_(std::move(wakeFd)),
      pendingHellos_(options.maxPendingHellos) {}

UcxTransportImpl::~UcxTransportImpl() {
  ucp_worker_h worker = worker_->get();
  // Withdraw the receives UCX has not matched (their callbacks run now), then force-close every
  // endpoint, which ends the sends on it: peers see this daemon fail.
  for (auto& [id, request] : requests_) {
    if (request->ucx != nullptr) ucp_request_cancel(worker, request->ucx);
  }
  for (InternalOp& op : internalOps_) ucp_request_cancel(worker, op.ucx);
  for (auto& [id, peer] : peers_) {
    if (peer->ep != nullptr) forceClose(*peer);
  }
  // No progress after the close: the worker would answer traffic still arriving for the closed
  // endpoints on new ones, which UCX 1.13 mishandles (assertions on both sides, fixed upstream
  // after 1.13). What UCX still holds is released unfinished, without callbacks, and
  // ucp_worker_destroy() purges it (UCX may warn that a send of a closed endpoint "was not
  // returned to mpool": the purge it scheduled needed the progress we skip).
  size_t released = 0;
  for (auto& [id, request] : requests_) {
    if (request->ucx != nullptr) {
      ucp_request_free(request->ucx);
      ++released;
    }
  }
  for (InboxEntry& entry : inbox_) {
    if (entry.ucx != nullptr) ucp_request_free(entry.ucx);
  }
  for (InternalOp& op : internalOps_) ucp_request_free(op.ucx);
  released += internalOps_.size();
  if (released > 0) spdlog::debug("ucx: released {} unfinished requests at teardown", released);
  // Then the worker and the context, the reverse of create().
  worker_.reset();
}

void UcxTransportImpl::setPeerFailureHandler(PeerFailureHandler handler) {
  handler_ = std::move(handler);
}

// ---- connections ------------------------------------------------------------------------------

Result<PeerId> UcxTransportImpl::connect(const PeerAddress& address) {
  std::optional<EndpointAddress> decoded = decodeAddress(address.bytes);
  if (!decoded) return invalidArgument("ucx: not a UCX endpoint address");
  if (auto known = peerByUuid_.find(decoded->uuid); known != peerByUuid_.end()) {
    Peer& peer = *peers_.at(known->second);
    if (peer.failed) return peer.failure;
    peer.connected = true;  // after disconnect(): the endpoint is still open
    return peer.id;
  }
  if (nextPeer_ > kMaxStamp) {
    return Status(Code::NoResource, "ucx: out of peer ids (" + std::to_string(kMaxStamp) + ")");
  }
  auto peer = std::make_unique<Peer>();
  peer->owner = this;
  peer->id = nextPeer_;
  peer->uuid = decoded->uuid;
  peer->secret = decoded->secret;
  uint64_t firstSequence = 0;
  HC_RETURN_IF_ERROR(
      fillRandom({reinterpret_cast<uint8_t*>(&firstSequence), sizeof(firstSequence)}));
  peer->nextSequence = firstSequence & kSequenceMask;
  peer->workerAddress.assign(decoded->worker.begin(), decoded->worker.end());
  // It may have connected to us first: its hello is waiting. If not, ours asks for it (it may
  // still be on its way, or a flood of hellos may have pushed it out of the pending ones).
  peer->stamp = pendingHellos_.take(peer->uuid);
  if (Status opened = openEndpoint(*peer); !opened.isOk()) {
    if (peer->stamp) (void)pendingHellos_.add(peer->uuid, *peer->stamp);
    return opened;
  }
  peer->connected = true;
  ++nextPeer_;
  peerByUuid_.emplace(peer->uuid, peer->id);
  const PeerId id = peer->id;
  peers_.emplace(id, std::move(peer));
  return id;
}

Status UcxTransportImpl::openEndpoint(Peer& peer) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer.workerAddress.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransportImpl::onEndpointError;
  params.err_handler.arg = &peer;  // a Peer is never destroyed before the transport
  HC_UCS_TRY(ucp_ep_create(worker_->get(), &params, &peer.ep),
             "ucp_ep_create to peer " + std::to_string(peer.id));
  sendHello(peer);
  return okStatus();
}

void UcxTransportImpl::sendHello(Peer& peer) {
  HelloMessage hello;
  hello.flags = peer.stamp ? 0 : kHelloWantsHello;
  hello.stamp = peer.id;
  hello.uuid = uuid_;
  hello.secret = peer.secret;
  std::vector<uint8_t> storage(sizeof(hello));
  std::memcpy(storage.data(), &hello, sizeof(hello));
  sendInternal(peer.ep, controlTag(0, 0), std::move(storage));
}

void UcxTransportImpl::forceClose(Peer& peer) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;  // ends every request on it at once
  ucs_status_ptr_t result = ucp_ep_close_nbx(peer.ep, &param);
  peer.ep = nullptr;
  keepInternal(result, {});
}

Status UcxTransportImpl::disconnect(PeerId id) {
  auto it = peers_.find(id);
  if (it == peers_.end() || !it->second->connected) {
    return notFound("peer " + std::to_string(id) + " not connected");
  }
  Peer& peer = *it->second;
  peer.connected = false;
  detachPeer(peer, unavailable("disconnected from peer " + std::to_string(id)));
  // The endpoint stays open, and connect() takes it up again. Closing it would either wait for
  // sends the peer may never take (flush) or leave the peer's in-flight traffic to arrive for a
  // closed endpoint (force), which UCX 1.13 answers on new endpoints it then mismatches.
  return okStatus();
}

Status UcxTransportImpl::checkPostable(PeerId id) const {
  auto it = peers_.find(id);
  if (it == peers_.end() || !it->second->connected) {
    return notFound("peer " + std::to_string(id) + " not connected");
  }
  if (it->second->failed) return it->second->failure;
  return okStatus();
}

// ---- failures ---------------------------------------------------------------------------------

void UcxTransportImpl::onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  // Inside ucp_worker_progress(): only record it; progress() acts once UCX has returned.
  auto* peer = static_cast<Peer*>(arg);
  if (ep != peer->ep) return;  // an endpoint already force-closed
  peer->owner->failedEndpoints_.emplace_back(peer->id, status);
}

void UcxTransportImpl::detachPeer(Peer& peer, const Status& why) {
  ucp_worker_h worker = worker_->get();
  for (auto& [id, request] : requests_) {
    if (request->peer != peer.id) continue;
    if (request->state == Request::State::Waiting) {
      finish(*request, why);
    } else if (request->state == Request::State::InFlight) {
      // A receive UCX has not matched yet ends now (cancelled, in the callback); one already
      // matched, and a send, end when UCX lets go of the buffer: when the peer has taken or
      // dropped the message, or, for a failed peer, in handleEndpointFailures().
      request->detached = why;
      ucp_request_cancel(worker, request->ucx);
    }
  }
  peer.held.clear();
  std::erase_if(posted_, [&](const auto& entry) { return entry.first.peer == peer.id; });
  std::erase_if(unexpected_, [&](auto& entry) {
    if (entry.first.peer != peer.id) return false;
    // A live peer's data still comes and must be taken out of UCX; a failed peer's either came
    // already (dropped with the rest of its data in handleEndpointFailures()) or never will.
    if (!peer.failed) {
      for (const Arrival& arrival : entry.second) {
        if (!arrival.isInline) drainData(peer.id, arrival.sequence);
      }
    }
    return true;
  });
  if (peer.failed) {
    // Drains posted for this peer's data earlier will never match now.
    for (InternalOp& op : internalOps_) {
      if (op.drainFrom == peer.id) ucp_request_cancel(worker, op.ucx);
    }
  }
}

void UcxTransportImpl::handleEndpointFailures() {
  for (auto [id, status] : std::exchange(failedEndpoints_, {})) {
    Peer& peer = *peers_.at(id);
    if (peer.failed) continue;
    peer.failed = true;
    peer.failure =
        unavailable("ucx peer " + std::to_string(id) + " failed: " + ucs_status_string(status));
    spdlog::warn("{}", peer.failure.message());
    detachPeer(peer, peer.failure);
    dropArrivedData(peer.id);
    if (peer.ep != nullptr) forceClose(peer);
    abandonInFlight(peer);
    if (peer.connected) failureReports_.emplace_back(id, peer.failure);
  }
}

void UcxTransportImpl::abandonInFlight(Peer& peer) {
  // UCX fails a rendezvous with a dead endpoint by itself, and the force-close purges the sends,
  // but some of those completions come a progress later, and a receive caught between the
  // fragments of an eager message it would hold for ever. The peer's connection is gone, so
  // nothing more is read from or written to these buffers: release the requests unfinished (no
  // callback follows) so that every request with the peer is final before the handler runs.
  for (auto& [id, request] : requests_) {
    if (request->peer != peer.id || request->state != Request::State::InFlight) continue;
    ucp_request_free(request->ucx);
    request->ucx = nullptr;
    finish(*request, request->detached.value_or(peer.failure));
  }
}

}  // namespace hc::transport::ucx
