// UcxTransportImpl: hc::transport::Transport over one UCP worker. Private to daemon/transport/ucx;
// the rest of the daemon creates it through createUcxTransport() (ucx_transport.h), which also
// describes the threading and the failure-detection bounds.
//
// How the contract maps onto UCX (the wire layout and why: ucx_wire.h):
// - connect() opens one UCP endpoint per peer daemon (error mode PEER), shared by everything
//   sent to that peer, and sends it a hello carrying the stamp it must put on its messages to us.
//   PeerIds are never reused: a peer keeps its id, and its endpoint, across disconnect() and
//   connect(); disconnect() only detaches the caller's requests (see disconnect() in the .cc).
// - Matching is ours, exact on (peer, every field of the tag), in post order on both sides:
//   progress() moves every arrived control message out of UCX into `unexpected_` or onto the
//   oldest posted receive of `posted_`. Payloads longer than UcxOptions::inlineBytes stay in UCX
//   until their receive is matched, then go straight into the caller's buffer.
// - Every final state is reported by test() only after a progress(); eventFd() is an epoll set
//   over the UCX worker's event fd and an eventfd of ours that signals states made final outside
//   progress() (matches in postRecv(), cancel(), disconnect()).
// - Anyone may open an endpoint to the worker and send under any tag: what such a stranger can
//   make the transport hold is bounded, what it refuses is counted (ucx_wire.h, "Strangers";
//   ucx_strangers.h), and only messages that carry this transport's secret are taken (ucx_wire.h,
//   "Proof").
// - A failed endpoint is only recorded inside UCX's error callback; progress() then fails the
//   peer's requests with Unavailable, closes the endpoint and calls the handler once, with no UCX
//   callback on the stack.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/ucx/ucx_strangers.h"
#include "daemon/transport/ucx/ucx_transport.h"
#include "daemon/transport/ucx/ucx_wire.h"
#include "daemon/transport/ucx/ucx_worker.h"

namespace hc::transport::ucx {

class UcxTransportImpl final : public Transport {
 public:
  [[nodiscard]] static Result<std::unique_ptr<UcxTransportImpl>> create(const UcxOptions& options);
  // Force-closes every endpoint (peers see this daemon fail), releases what UCX still holds
  // unfinished, then destroys the worker and the context. Does not wait.
  ~UcxTransportImpl() override;
  UcxTransportImpl(const UcxTransportImpl&) = delete;
  UcxTransportImpl& operator=(const UcxTransportImpl&) = delete;

  // hc::transport::Transport
  std::string_view name() const override { return "ucx"; }
  PeerAddress address() const override { return PeerAddress{address_}; }
  Result<PeerId> connect(const PeerAddress& address) override;
  Status disconnect(PeerId peer) override;
  bool movesMemory(MemoryKind kind) const override;
  size_t directMinBytes() const override { return options_.inlineBytes + 1; }
  using Transport::postRecv;
  using Transport::postSend;
  Result<RequestId> postSend(PeerId peer, Tag tag, const void* buf, size_t bytes,
                             MemoryKind kind) override;
  Result<RequestId> postRecv(PeerId peer, Tag tag, void* buf, size_t bytes,
                             MemoryKind kind) override;
  using Transport::test;
  Result<bool> test(RequestId request, size_t* bytes) override;
  size_t progress() override;
  Status cancel(RequestId request) override;
  size_t dropUnexpected(const std::function<bool(const UnexpectedMessage&)>& drop) override;
  int eventFd() const override { return epollFd_.get(); }
  void setPeerFailureHandler(PeerFailureHandler handler) override;

  // What endpoints that are no live peer sent and this transport refused (ucx_strangers.h), and
  // how many hellos of endpoints not connected yet it holds. For tests and diagnostics; same
  // thread as the rest.
  StrangerCounts strangerCounts() const;
  size_t pendingHellos() const { return pendingHellos_.size(); }
  // Control messages taken out of UCX whose bytes are still arriving.
  size_t controlArriving() const;

 private:
  struct Peer {
    UcxTransportImpl* owner;
    PeerId id;
    uint64_t uuid;
    Secret secret;  // its own, from its address: every hello and header we send it carries it
    std::vector<uint8_t> workerAddress;
    ucp_ep_h ep = nullptr;   // open from the first connect() until failure or teardown
    bool connected = false;  // by connect(), until disconnect()
    bool failed = false;     // for good: its daemon is gone
    Status failure;          // why, once failed
    // The stamp its hello asked for; sends wait in `held` until it is known. Set once: the first
    // hello naming this uuid is the one the peer sent when it opened its endpoint to us.
    std::optional<PeerId> stamp;
    bool helloResent = false;  // we answered a kHelloWantsHello from it (once per peer)
    // Starts at a random offset (ucx_wire.h, "Proof"): our data tags to it are not guessable.
    uint64_t nextSequence = 0;
    std::deque<RequestId> held;
  };

  struct Request {
    enum class Kind : uint8_t { Send, Recv };
    enum class State : uint8_t {
      Waiting,   // send: held for the peer's hello; receive: posted, unmatched
      InFlight,  // a UCX request carries it (`ucx`)
      Ready,     // final, waiting for progress() to report it
      Done,      // final and reported: test() returns it and releases the request
    };
    UcxTransportImpl* owner;
    RequestId id;
    Kind kind;
    PeerId peer;
    Tag tag;
    void* buf;        // a send's payload is only read
    size_t capacity;  // a send's length
    MemoryKind memory = MemoryKind::Host;
    State state = State::Waiting;
    void* ucx = nullptr;
    // Set when the peer was disconnected or failed while UCX still held the request: it then
    // ends with this status whatever UCX reports.
    std::optional<Status> detached;
    Status status;
    size_t bytes = 0;
    MessageHeader header;   // a send's header, lent to UCX with the payload
    ucp_dt_iov_t iov[2]{};  // header + payload of an inline send
  };

  // A message that arrived before its receive was posted.
  struct Arrival {
    uint64_t sequence;  // names the data message when the payload did not come inline
    uint64_t bytes;
    bool isInline;
    // The whole control message: an inline payload starts at `payloadAt` (the header's
    // headerBytes).
    std::vector<uint8_t> control;
    size_t payloadAt = 0;
    std::chrono::steady_clock::time_point arrived;  // when pumpControl() found it in UCX
  };

  // A control message of a live peer being received out of UCX, in arrival order.
  struct InboxEntry {
    uint64_t ucxTag;
    std::chrono::steady_clock::time_point arrived;  // when the probe found it
    std::vector<uint8_t> bytes;
    void* ucx = nullptr;  // while the receive is in flight
    ucs_status_t status = UCS_OK;
    // Still arriving past kHoldBackLimit (ucx_progress.cc): no longer holds back its stamp.
    bool stalled = false;
  };

  // A UCX request of ours that no caller waits for: hellos, headers, drained data, closes.
  struct InternalOp {
    void* ucx;
    std::vector<uint8_t> storage;  // what a send lends UCX
    PeerId drainFrom = 0;          // a drain: the peer whose data it takes
  };

  struct MatchKey {
    PeerId peer;
    Tag tag;
    bool operator==(const MatchKey&) const = default;
  };
  struct MatchKeyHash {
    size_t operator()(const MatchKey& k) const { return hashTag(k.tag, k.peer); }
  };

  UcxTransportImpl(const UcxOptions& options, std::unique_ptr<UcxWorker> worker, uint64_t uuid,
                   const Secret& secret, UniqueFd epollFd, UniqueFd wakeFd);

  // ---- connections (ucx_transport_impl.cc) ----
  Status openEndpoint(Peer& peer);
  void sendHello(Peer& peer);
  // Closes the peer's endpoint without waiting for anything: on teardown and after a failure.
  void forceClose(Peer& peer);
  // NotFound unless connected; Unavailable once failed.
  Status checkPostable(PeerId peer) const;
  // InvalidArgument for a memory kind this UCX was not built to move.
  Status checkMemory(MemoryKind kind) const;
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Fails every request with `peer` that is not final yet with `why`, and drops its arrivals.
  void detachPeer(Peer& peer, const Status& why);
  // Ends every request with a failed peer that UCX still holds, without waiting for UCX.
  void abandonInFlight(Peer& peer);
  // Acts on the failures onEndpointError recorded: fails the peers' requests, closes their
  // endpoints and queues one report per connected peer for the handler.
  void handleEndpointFailures();

  // ---- messages (ucx_messages.cc) ----
  Request& addRequest(Request::Kind kind, PeerId peer, Tag tag, void* buf, size_t bytes);
  void issueSend(Peer& peer, Request& request);
  // Hands a receive its message: copies an inline payload, or posts the UCX receive of the data.
  void deliver(Request& request, Arrival& arrival);
  // Ties `request` to a UCX request handle, or fails it with the error the call returned. The
  // caller handles a call that completed at once (it knows the length).
  void track(Request& request, ucs_status_ptr_t result, const char* what);
  void finish(Request& request, Status status, size_t bytes = 0);
  static void onSendDone(void* ucxRequest, ucs_status_t status, void* user);
  static void onRecvDone(void* ucxRequest, ucs_status_t status, const ucp_tag_recv_info_t* info,
                         void* user);
  // UCX is done with `ucxRequest`, which carried `request`.
  void completeFromUcx(Request& request, void* ucxRequest, ucs_status_t status, size_t bytes);
  // Receives and drops the data message (stamp, sequence) whose header will never match, now or
  // whenever it arrives.
  void drainData(PeerId stamp, uint64_t sequence);
  // Receives and drops every data message from `stamp` that UCX holds unmatched, and those taken
  // out of UCX for headers of it (announced_).
  void dropArrivedData(PeerId stamp);
  // The data message (stamp, sequence) that dropUnannouncedData() took out of UCX, if it did;
  // either way the header's announcement ends here.
  ucp_tag_message_h takeAnnounced(PeerId stamp, uint64_t sequence);
  void sendInternal(ucp_ep_h ep, uint64_t ucxTag, std::vector<uint8_t> storage);
  void keepInternal(ucs_status_ptr_t result, std::vector<uint8_t> storage, PeerId drainFrom = 0);

  // ---- progress (ucx_progress.cc) ----
  // Takes every arrived control message out of UCX and handles those whose receive finished,
  // in arrival order per sender.
  void pumpControl();
  // Whether a control message of `length` bytes under `ucxTag` may be received into memory: a
  // hello of exactly its size, or a live peer's message no longer than a header plus
  // inlineBytes. Counts and logs what it refuses; the caller drops that unread.
  bool admitControl(uint64_t ucxTag, size_t length);
  // Handles the inbox's finished receives: each sender's in its send order, one sender's
  // unfinished message holding back only that sender, and for at most kHoldBackLimit.
  void handleInbox();
  // Receives into nothing every data message under a stamp never handed out (0, or nextPeer_
  // and above): no peer sent it, and no receive will ever take it.
  void dropStrayData();
  // Takes out of UCX every data message under a live peer's stamp: one that a proven header
  // announced is kept for its receive (announced_); any other was not sent by that peer and is
  // dropped unread. Runs right after pumpControl(), when every header sent before a data message
  // that UCX holds has been taken; skips stamps with a control message still in the inbox.
  void dropUnannouncedData();
  void handleControl(uint64_t ucxTag, std::vector<uint8_t> bytes,
                     std::chrono::steady_clock::time_point arrived);
  void handleHello(const HelloMessage& hello);
  // Counts one refusal of `counter` and logs describe()'s text when its turn comes.
  template <typename Describe>
  void refuse(RefusalCounter& counter, Describe&& describe);
  void pollInternalOps();
  void signalWake();

  const UcxOptions options_;
  std::unique_ptr<UcxWorker> worker_;
  const uint64_t uuid_;
  const Secret secret_;  // what every message to us must carry (ucx_wire.h, "Proof")
  const std::vector<uint8_t> address_;
  UniqueFd epollFd_;  // over worker_->eventFd() and wakeFd_
  UniqueFd wakeFd_;

  std::unordered_map<PeerId, std::unique_ptr<Peer>> peers_;
  std::unordered_map<uint64_t, PeerId> peerByUuid_;
  // Stamps from hellos of peers we have not connected to yet, by their uuid (bounded).
  PendingHellos pendingHellos_;
  PeerId nextPeer_ = 1;

  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  RequestId nextRequest_ = 1;
  std::unordered_map<MatchKey, std::deque<RequestId>, MatchKeyHash> posted_;
  std::unordered_map<MatchKey, std::deque<Arrival>, MatchKeyHash> unexpected_;
  // The data messages that headers in unexpected_ announced, by their UCX tag: the message once
  // dropUnannouncedData() took it out of UCX, else null (it is still arriving, or in UCX).
  std::unordered_map<uint64_t, ucp_tag_message_h> announced_;
  std::deque<InboxEntry> inbox_;
  // Hellos in the inbox still being received (see pumpControl()), at most kMaxHellosInFlight.
  static constexpr size_t kMaxHellosInFlight = 64;
  size_t hellosInFlight_ = 0;
  std::vector<InternalOp> internalOps_;

  std::vector<RequestId> ready_;                                  // final, for the next progress()
  std::vector<std::pair<PeerId, ucs_status_t>> failedEndpoints_;  // from onEndpointError
  std::vector<std::pair<PeerId, Status>> failureReports_;         // for the handler
  PeerFailureHandler handler_;
  bool inProgress_ = false;  // progress() reports what finishes meanwhile: no wake needed
  bool wakePending_ = false;

  // What was refused from strangers (StrangerCounts says what each is), and when progress()
  // last looked for stray data.
  struct Refusals {
    RefusalCounter oversizedControl, unknownStamp, malformedControl, unprovenControl,
        repeatedHellos, evictedHellos, slowHellos, strayData, unannouncedData, stalledControl;
  } refusals_;
  std::chrono::steady_clock::time_point nextStraySweep_{};
};

}  // namespace hc::transport::ucx
