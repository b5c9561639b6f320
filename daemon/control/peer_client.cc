#include "daemon/control/peer_client.h"

#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "daemon/control/grpc_status.h"
#include "daemon/control/membership_proof.h"
#include "daemon/control/peer_convert.h"
#include "daemon/peer/unique_id.h"
#include "hetero_comm/v1/peer.grpc.pb.h"

namespace hc::control {
namespace detail {

// The joins of one PeerClient that gRPC may still be holding.
struct JoinsInFlight {
  std::mutex mutex;
  std::condition_variable drained;
  uint64_t nextId = 1;
  // By join id: the join's current call (a join asked again after a capacity refusal makes a
  // new call under the same id), started and not yet destroyed.
  std::unordered_map<uint64_t, std::weak_ptr<JoinCall>> calls;
  std::unordered_set<uint64_t> withdrawn;  // taken back by their caller, not yet finished
  size_t alive = 0;                        // JoinCall objects not yet fully destroyed
  bool stopping = false;                   // the PeerClient is going away: no call starts any more
};

// Joins waiting out a capacity pause, on a thread of their own: each resumes (true) when its
// pause is over, or at once (false) when the client stops.
class CapacityPauses {
 public:
  using Clock = std::chrono::steady_clock;
  using Resume = std::function<void(bool over)>;

  CapacityPauses() : thread_([this] { run(); }) {}
  ~CapacityPauses() {
    stop();
    thread_.join();
  }

  // False once stopped: the caller then finishes the join itself.
  bool add(Clock::time_point when, Resume resume) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return false;
      waiting_.emplace(when, std::move(resume));
    }
    wake_.notify_all();
    return true;
  }

  // Resumes every waiting join with false, on the pause thread, before it returns.
  void stop() {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
    drained_.wait(lock, [&] { return waiting_.empty() && !resuming_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (waiting_.empty()) {
        if (stopping_) return;
        wake_.wait(lock);
        continue;
      }
      auto first = waiting_.begin();
      if (!stopping_ && first->first > Clock::now()) {
        wake_.wait_until(lock, first->first);
        continue;
      }
      Resume resume = std::move(first->second);
      waiting_.erase(first);
      resuming_ = true;
      lock.unlock();
      resume(!stopping());
      lock.lock();
      resuming_ = false;
      drained_.notify_all();
    }
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_;
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  bool stopping_ = false;
  bool resuming_ = false;
  std::multimap<Clock::time_point, Resume> waiting_;
  std::thread thread_;  // last: starts once the members it uses exist
};

}  // namespace detail

namespace {

using Clock = PeerClient::Clock;
using detail::JoinCall;
using detail::JoinsInFlight;

// Bytes of `value` as a protobuf varint.
constexpr size_t varintBytes(uint64_t value) {
  size_t bytes = 1;
  for (; value >= 0x80; value >>= 7) ++bytes;
  return bytes;
}
// A field with its tag: one byte, as every field number of Peer's messages is under 16.
constexpr size_t varintField(uint64_t value) { return 1 + varintBytes(value); }
constexpr size_t lengthField(size_t bodyBytes) { return 1 + varintBytes(bodyBytes) + bodyBytes; }

// The memory quota of a channel to a root (RootChannel): twice the receive limit per join under
// way, as gRPC's read buffers hold the data of several calls and live until the last of them is
// consumed (one limit per join refused an honest answer now and then, with 31 answers near the
// limit arriving at once: peer_client_limit_test), plus the read buffers themselves.
constexpr size_t kQuotaPerJoinLimits = 2;
constexpr size_t kTransportSlackBytes = size_t{8} << 20;

// gRPC's own refusal of an answer over a RootChannel's limits: RESOURCE_EXHAUSTED with "Received
// message larger than max (<size> vs. <limit>)" (the receive limit) or "Buffers full" (the memory
// quota), in gRPC core's words. A root's capacity refusal has the same code but other words, and
// is asked again; these are not.
bool overReceiveLimit(const grpc::Status& status) {
  const std::string& message = status.error_message();
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         (message.find("larger than max") != std::string::npos ||
          message.find("Buffers full") != std::string::npos);
}

// A root that refuses a join for capacity (NoResource: too many communicators forming there) is
// asked again after a pause that doubles from the first to the last, until the join's deadline.
constexpr std::chrono::milliseconds kFirstCapacityPause{20};
constexpr std::chrono::milliseconds kLastCapacityPause{1000};

// gRPC deadlines are wall-clock; ours are steady. Far deadlines (time_point::max() included)
// are clamped to a year before `extra` is added, which keeps the arithmetic clear of overflow.
std::chrono::system_clock::time_point toWallClock(Clock::time_point deadline,
                                                  Clock::duration extra = {}) {
  const auto now = Clock::now();
  const auto remaining =
      deadline <= now ? Clock::duration::zero()
                      : std::min<Clock::duration>(deadline - now, std::chrono::hours(24 * 365));
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining + extra);
}

// Counts a JoinCall as alive until its last member is gone: declared first, destroyed last,
// after the contexts and the stub have dropped their channel references.
class AliveMark {
 public:
  explicit AliveMark(std::shared_ptr<JoinsInFlight> inFlight) : inFlight_(std::move(inFlight)) {
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    ++inFlight_->alive;
  }
  ~AliveMark() {
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    if (--inFlight_->alive == 0) inFlight_->drained.notify_all();
  }

 private:
  const std::shared_ptr<JoinsInFlight> inFlight_;
};

}  // namespace

size_t maxJoinResponseBytes(uint32_t nranks) {
  const size_t n = nranks;
  // Every node index, local rank and rank number is below nranks.
  const size_t index = varintBytes(n);
  const size_t placement = lengthField(varintField(n) + varintField(n));  // node, local_rank
  const size_t identity = lengthField(3 * lengthField(peer::kMaxIdentityFieldBytes));
  const size_t address = lengthField(peer::kMaxTransportAddressBytes);
  // The most nodes there can be, one rank each, cost the most: a node costs far more than the
  // few bytes its rank adds to the packed list of a node holding several.
  const size_t node = lengthField(identity + address + lengthField(index));
  const size_t table = varintField(n) + (1 + sizeof(uint64_t)) + n * (placement + node);
  const size_t response = lengthField(table) + lengthField(kProofBytes) + varintField(UINT32_MAX);
  return std::clamp(response, kMinJoinResponseBytes, kMaxRankTableBytes);
}

size_t joinReceiveLimit(uint32_t nranks) { return std::bit_ceil(maxJoinResponseBytes(nranks)); }

namespace detail {

// The channel to one root for one receive limit. gRPC reads a whole message into memory before it
// checks it against the receive limit, so the limit alone keeps only the parsing in bounds; the
// channel's memory quota keeps the reading: past it, gRPC cancels a call with "Buffers full". Each
// join under way may receive up to the limit (a daemon sends a join per local rank, and the root
// answers them all at once), so the quota follows their number. Thread-safe; the PeerClient and
// its JoinCalls share it.
class RootChannel {
 public:
  RootChannel(const std::string& rootAddress, size_t receiveLimit)
      : receiveLimit_(receiveLimit), quota_("peer " + rootAddress) {
    quota_.Resize(kTransportSlackBytes);
    grpc::ChannelArguments arguments;
    // What an honest answer to the join can be (joinReceiveLimit), not what the root says: past
    // gRPC's 4 MiB default from about 60 nodes with the largest transport addresses.
    arguments.SetMaxReceiveMessageSize(static_cast<int>(receiveLimit));
    arguments.SetResourceQuota(quota_);
    // Plaintext until mTLS lands (peer_server.h: PeerTlsOptions); the HMAC proofs authenticate
    // joiner and root to each other meanwhile.
    channel_ =
        grpc::CreateCustomChannel(rootAddress, grpc::InsecureChannelCredentials(), arguments);
  }

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Each JoinCall counts itself from its construction to its destruction.
  void joinStarted() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++joins_;
    resizeQuota();
  }
  void joinEnded() {
    std::lock_guard<std::mutex> lock(mutex_);
    --joins_;
    resizeQuota();
  }

 private:
  void resizeQuota() {
    quota_.Resize(joins_ * kQuotaPerJoinLimits * receiveLimit_ + kTransportSlackBytes);
  }

  const size_t receiveLimit_;
  grpc::ResourceQuota quota_;
  std::shared_ptr<grpc::Channel> channel_;
  std::mutex mutex_;
  size_t joins_ = 0;
};

// One join under way: Challenge, then Join. Owns every object gRPC borrows during the calls and
// keeps itself alive through the callbacks it hands gRPC.
class JoinCall : public std::enable_shared_from_this<JoinCall> {
 public:
  JoinCall(uint64_t id, std::shared_ptr<JoinsInFlight> inFlight,
           std::shared_ptr<const ClusterToken> token, std::shared_ptr<RootChannel> channel,
           std::string root, peer::JoinRequest request, Clock::time_point deadline,
           const PeerClientOptions& options, JoinCallback done, CapacityPauses* pauses,
           std::chrono::milliseconds capacityPause = kFirstCapacityPause)
      : alive_(inFlight),
        inFlight_(std::move(inFlight)),
        id_(id),
        token_(std::move(token)),
        channel_(std::move(channel)),
        stub_(hetero_comm::v1::Peer::NewStub(channel_->channel())),
        root_(std::move(root)),
        request_(std::move(request)),
        deadline_(deadline),
        options_(options),
        done_(std::move(done)),
        pauses_(pauses),
        capacityPause_(capacityPause) {
    channel_->joinStarted();
  }

  ~JoinCall() {
    channel_->joinEnded();
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    // Unless a newer call of the same join has taken the entry.
    auto it = inFlight_->calls.find(id_);
    if (it != inFlight_->calls.end() && it->second.expired()) inFlight_->calls.erase(it);
  }

  // Makes the call reachable by cancel(), then starts it.
  void start() {
    Status refused;
    {
      std::lock_guard<std::mutex> lock(inFlight_->mutex);
      if (inFlight_->stopping) {
        refused = unavailable("hetero-commd is shutting down");
      } else if (inFlight_->withdrawn.contains(id_)) {
        refused = unavailable("join at " + root_ + " withdrawn: its client went away");
      } else {
        inFlight_->calls[id_] = weak_from_this();
      }
    }
    if (!refused.isOk()) return finish(std::move(refused));
    Result<Nonce> joinerNonce = randomNonce();
    if (!joinerNonce.isOk()) return finish(joinerNonce.status());
    joinerNonce_ = joinerNonce.value();
    challengeContext_.set_deadline(toWallClock(deadline_));
    challengeContext_.set_wait_for_ready(options_.waitForRoot);
    stub_->async()->Challenge(
        &challengeContext_, &challengeRequest_, &challengeResponse_,
        [self = shared_from_this()](grpc::Status s) { self->onChallenge(s); });
  }

  // Any thread but a gRPC callback; the callback still runs, with CANCELLED.
  void cancel() {
    challengeContext_.TryCancel();
    joinContext_.TryCancel();
  }

 private:
  // The answer to `rpc` was over the channel's receive limit or memory quota: gRPC refused it
  // before parsing it.
  Status tooLarge(const grpc::Status& status, const std::string& rpc) const {
    return Status(Code::RemoteError,
                  rpc + " at " + root_ + ": the root's answer is over " +
                      std::to_string(joinReceiveLimit(request_.nranks)) +
                      " bytes, more than a rank table of " + std::to_string(request_.nranks) +
                      " ranks can be (" + std::to_string(maxJoinResponseBytes(request_.nranks)) +
                      " bytes at most); refused before parsing (" + status.error_message() + ")");
  }

  void onChallenge(const grpc::Status& status) {
    if (overReceiveLimit(status)) return finish(tooLarge(status, "Peer.Challenge"));
    if (!status.ok()) return finish(fromGrpcStatus(status, "Peer.Challenge at " + root_));
    Result<Nonce> rootNonce = nonceOf(challengeResponse_.nonce(), "nonce");
    if (!rootNonce.isOk()) {
      return finish(Status(Code::RemoteError,
                           "Peer.Challenge at " + root_ + ": " + rootNonce.status().message()));
    }
    const auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (remaining.count() <= 0) {
      return finish(Status(Code::Timeout, "join at " + root_ + ": deadline passed before Join"));
    }
    request_.timeout = std::min(remaining, std::chrono::milliseconds(UINT32_MAX));
    const Proof proof = computeJoinProof(*token_, rootNonce.value(), joinerNonce_, request_);
    toProto(request_, rootNonce.value(), joinerNonce_, proof, &joinRequest_);
    joinContext_.set_deadline(toWallClock(deadline_, options_.replyGrace));
    stub_->async()->Join(&joinContext_, &joinRequest_, &joinResponse_,
                         [self = shared_from_this()](grpc::Status s) { self->onJoin(s); });
  }

  void onJoin(const grpc::Status& status) {
    if (overReceiveLimit(status)) return finish(tooLarge(status, "Peer.Join"));
    if (!status.ok()) {
      Status refused = fromGrpcStatus(status, "Peer.Join at " + root_);
      if (refused.code() == Code::NoResource) return askAgainLater(std::move(refused));
      return finish(std::move(refused));
    }
    const uint32_t rootVersion =
        joinResponse_.wire_version() == 0 ? 1 : joinResponse_.wire_version();
    if (rootVersion != request_.wireVersion) {
      return finish(Status(
          Code::InvalidArgument,
          "Peer.Join at " + root_ + ": " +
              peer::wireVersionMismatch("the root daemon", rootVersion, request_.wireVersion)));
    }
    Result<peer::RankTable> table = fromProto(joinResponse_.table());
    if (!table.isOk()) {
      return finish(
          Status(Code::RemoteError, "Peer.Join at " + root_ + ": " + table.status().message()));
    }
    if (!verifyTableProof(*token_, joinerNonce_, request_.key, table.value(),
                          bytesOf(joinResponse_.table_proof()))) {
      return finish(Status(Code::PermissionDenied,
                           "Peer.Join at " + root_ +
                               ": the root's answer does not carry a valid proof of the cluster "
                               "token; refusing its rank table"));
    }
    if (table->nranks != request_.nranks) {
      return finish(Status(Code::RemoteError, "Peer.Join at " + root_ + ": rank table for " +
                                                  std::to_string(table->nranks) + " ranks, not " +
                                                  std::to_string(request_.nranks)));
    }
    finish(std::move(table));
  }

  // After a capacity refusal: a fresh call (gRPC contexts serve one call each) once the pause is
  // over, or the refusal itself when the deadline comes first or the client goes away.
  void askAgainLater(Status refused) {
    const Clock::time_point over = Clock::now() + capacityPause_;
    if (over >= deadline_) return finish(std::move(refused));
    const bool paused = pauses_->add(over, [self = shared_from_this(), refused](bool resumed) {
      self->onPauseOver(resumed, refused);
    });
    if (!paused) finish(std::move(refused));
  }

  void onPauseOver(bool resumed, Status refused) {
    if (!resumed) return finish(std::move(refused));  // the client stopped
    auto next = std::make_shared<JoinCall>(id_, inFlight_, token_, channel_, root_, request_,
                                           deadline_, options_, std::move(done_), pauses_,
                                           std::min(capacityPause_ * 2, kLastCapacityPause));
    next->start();
  }

  void finish(Result<peer::RankTable> result) {
    {
      // The join is over: a withdraw() from now on finds nothing to take back (or to remember).
      std::lock_guard<std::mutex> lock(inFlight_->mutex);
      inFlight_->withdrawn.erase(id_);
      auto it = inFlight_->calls.find(id_);
      if (it != inFlight_->calls.end() && it->second.lock().get() == this) {
        inFlight_->calls.erase(it);
      }
    }
    JoinCallback done = std::move(done_);
    done(std::move(result));
  }

  AliveMark alive_;  // first: outlives every other member
  const std::shared_ptr<JoinsInFlight> inFlight_;
  const uint64_t id_;  // the join's, the same for every call it makes
  const std::shared_ptr<const ClusterToken> token_;
  const std::shared_ptr<RootChannel> channel_;
  const std::unique_ptr<hetero_comm::v1::Peer::Stub> stub_;
  const std::string root_;
  peer::JoinRequest request_;
  Nonce joinerNonce_{};
  const Clock::time_point deadline_;
  const PeerClientOptions options_;
  JoinCallback done_;
  CapacityPauses* const pauses_;  // the PeerClient's, which outlives every call
  const std::chrono::milliseconds capacityPause_;
  grpc::ClientContext challengeContext_;
  hetero_comm::v1::ChallengeRequest challengeRequest_;
  hetero_comm::v1::ChallengeResponse challengeResponse_;
  grpc::ClientContext joinContext_;
  hetero_comm::v1::JoinRequest joinRequest_;
  hetero_comm::v1::JoinResponse joinResponse_;
};

}  // namespace detail

Result<std::unique_ptr<PeerClient>> PeerClient::create(const PeerClientOptions& options) {
  if (options.tokenPath.empty()) return invalidArgument("joining peers needs a token file");
  Result<ClusterToken> token = ClusterToken::load(options.tokenPath);
  if (!token.isOk()) return token.status();
  return std::unique_ptr<PeerClient>(new PeerClient(std::move(token).value(), options));
}

PeerClient::PeerClient(ClusterToken token, const PeerClientOptions& options)
    : token_(std::make_shared<const ClusterToken>(std::move(token))),
      options_(options),
      inFlight_(std::make_shared<JoinsInFlight>()),
      pauses_(std::make_unique<detail::CapacityPauses>()) {}

PeerClient::~PeerClient() {
  std::vector<std::shared_ptr<JoinCall>> calls;
  {
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    inFlight_->stopping = true;
    for (auto& [id, weak] : inFlight_->calls) {
      if (auto call = weak.lock()) calls.push_back(std::move(call));
    }
  }
  // Outside the lock: a cancelled call's callback may run, and its destructor takes the lock.
  for (const auto& call : calls) call->cancel();
  calls.clear();
  pauses_->stop();  // joins pausing after a capacity refusal end with that refusal
  std::unique_lock<std::mutex> lock(inFlight_->mutex);
  inFlight_->drained.wait(lock, [&] { return inFlight_->alive == 0; });
  // Only now may channels_ drop what may be the channels' last references: on this thread.
}

// One channel per root ever joined and receive limit, kept for reuse: a daemon meets few roots,
// joins of similar nranks share a limit, and an idle channel costs a little memory, no connection.
std::shared_ptr<detail::RootChannel> PeerClient::channelFor(const std::string& rootAddress,
                                                            size_t receiveLimit) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<detail::RootChannel>& channel = channels_[{rootAddress, receiveLimit}];
  if (!channel) channel = std::make_shared<detail::RootChannel>(rootAddress, receiveLimit);
  return channel;
}

JoinId PeerClient::joinAsync(const std::string& rootAddress, peer::JoinRequest request,
                             Clock::time_point deadline, JoinCallback done) {
  // Checked here so that a bad request fails at once, not at the root after a round trip.
  Status valid = peer::validatePeerAddress(rootAddress);
  if (valid.isOk()) {
    request.timeout = std::chrono::milliseconds(1);  // any in range: the real one is set later
    valid = peer::validateJoin(request);
  }
  if (!valid.isOk()) {
    done(std::move(valid));
    return 0;
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    id = inFlight_->nextId++;
  }
  std::shared_ptr<detail::RootChannel> channel =
      channelFor(rootAddress, joinReceiveLimit(request.nranks));
  auto call = std::make_shared<JoinCall>(id, inFlight_, token_, std::move(channel), rootAddress,
                                         std::move(request), deadline, options_, std::move(done),
                                         pauses_.get());
  call->start();
  return id;
}

void PeerClient::withdraw(JoinId id) {
  std::shared_ptr<JoinCall> call;
  {
    std::lock_guard<std::mutex> lock(inFlight_->mutex);
    auto it = inFlight_->calls.find(id);
    if (it == inFlight_->calls.end()) return;  // finished, or never started
    call = it->second.lock();
    if (!call) return;
    inFlight_->withdrawn.insert(id);
  }
  // The root takes the join back when its call is cancelled (PeerService::Join's OnCancel); a
  // join pausing after a capacity refusal finds itself withdrawn when the pause ends.
  call->cancel();
}

Result<peer::RankTable> PeerClient::join(const std::string& rootAddress,
                                         const peer::JoinRequest& request,
                                         Clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<Result<peer::RankTable>>>();
  std::future<Result<peer::RankTable>> result = promise->get_future();
  (void)joinAsync(rootAddress, request, deadline,
                  [promise](Result<peer::RankTable> r) { promise->set_value(std::move(r)); });
  return result.get();
}

}  // namespace hc::control
