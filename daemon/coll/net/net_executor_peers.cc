// ProgressLoop: peers, their failures, and the heartbeats that find the silent ones.
//
// The heartbeat protocol. Every heartbeat is one 8-byte message (the sender's count of heartbeats
// sent to that peer, for debugging) with the tag makeTag(kHeartbeatIdentity, 0, 0). One tag
// suffices: the transport matches a peer's messages with one tag in order, so each heartbeat lands
// in the next receive we post. Heartbeats from a peer we never connected to (or stopped listening
// to) would wait unmatched forever; every heartbeat interval they are discarded.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "daemon/coll/net/net_executor_loop.h"

namespace hc::coll::net::detail {
namespace {

constexpr transport::Tag kBeatTag = transport::makeTag(transport::kHeartbeatIdentity, 0, 0);

int64_t millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::string nodeName(uint32_t node) { return "peer daemon " + std::to_string(node); }

}  // namespace

Result<transport::PeerId> ProgressLoop::resolve(const transport::PeerAddress& address,
                                                uint32_t node) {
  transport::PeerId id = 0;
  auto known = byAddress_.find(address.bytes);
  if (known != byAddress_.end()) {
    id = known->second;
  } else {
    Result<transport::PeerId> connected = transport_->connect(address);
    if (!connected.isOk()) {
      const Status& why = connected.status();
      return Status(why.code(), nodeName(node) + ": connect: " + why.message());
    }
    id = *connected;
    byAddress_.emplace(address.bytes, id);
  }
  std::unique_ptr<Peer>& peer = peers_[id];
  if (!peer) {
    peer = std::make_unique<Peer>();
    peer->id = id;
    greet(*peer);
  }
  if (peer->failed) return unavailable(nodeName(node) + " " + peer->failure.message());
  return id;
}

void ProgressLoop::greet(Peer& peer) {
  // Listen and speak at once, whether or not this peer has a job with us yet: its silence clock
  // starts only with its first heartbeat, which comes once it connects to us too.
  postBeatRecv(peer);
  if (!peer.failed) sendBeat(peer);
}

void ProgressLoop::postBeatRecv(Peer& peer) {
  Result<transport::RequestId> id =
      transport_->postRecv(peer.id, kBeatTag, &peer.inbox, sizeof(peer.inbox));
  if (id.isOk()) {
    peer.beatRecv = *id;
  } else if (id.status().code() == Code::Unavailable) {
    failPeer(peer, "went away: " + id.status().message(), /*disconnect=*/false);
  } else {
    spdlog::warn("net executor: cannot listen for heartbeats of transport peer {}: {}", peer.id,
                 id.status().toString());
  }
}

void ProgressLoop::sendBeat(Peer& peer) {
  if (peer.beatSend != 0) return;  // the last one is still on its way (a slow or stopped peer)
  Result<transport::RequestId> id =
      transport_->postSend(peer.id, kBeatTag, &peer.outbox, sizeof(peer.outbox));
  if (id.isOk()) {
    peer.beatSend = *id;
    ++peer.outbox;
  }
  // A failure here is the transport's to report (the failure handler), or the silence check's.
}

void ProgressLoop::pollHeartbeats(Clock::time_point now) {
  for (auto& [id, entry] : peers_) {
    Peer& peer = *entry;
    if (peer.beatSend != 0) {
      Result<bool> sent = transport_->test(peer.beatSend);
      if (!sent.isOk() || *sent) peer.beatSend = 0;
    }
    if (peer.beatRecv == 0) continue;
    Result<bool> received = transport_->test(peer.beatRecv);
    if (received.isOk() && !*received) continue;
    peer.beatRecv = 0;
    if (received.isOk()) {
      peer.heard = true;
      peer.lastHeard = now;
    } else if (received.status().code() == Code::Unavailable) {
      continue;  // cancelled by us, or the peer failed: the handler reports that
    } else {
      // Not a heartbeat (someone used the reserved identity with a longer message): keep listening.
      spdlog::warn("net executor: heartbeat from transport peer {}: {}", peer.id,
                   received.status().toString());
    }
    if (!peer.failed && !shuttingDown_) postBeatRecv(peer);
  }
}

size_t ProgressLoop::handleReportedFailures() {
  std::vector<std::pair<transport::PeerId, Status>> reported = std::move(reportedFailures_);
  reportedFailures_.clear();
  for (const auto& [id, why] : reported) {
    std::unique_ptr<Peer>& peer = peers_[id];
    if (!peer) {  // only peers we connected are reported; keep the record anyway
      peer = std::make_unique<Peer>();
      peer->id = id;
    }
    failPeer(*peer, "went away: " + why.message(), /*disconnect=*/false);
  }
  return reported.size();
}

void ProgressLoop::failPeer(Peer& peer, const std::string& reason, bool disconnect) {
  if (peer.failed) return;
  peer.failed = true;
  peer.failure = unavailable(reason);
  spdlog::warn("net executor: transport peer {} {}; failing its {} running job(s)", peer.id, reason,
               peer.runningJobs);
  for (Job& job : jobs_) {
    const auto& peers = job.spec.peers;
    for (uint32_t node = 0; node < peers.size(); ++node) {
      if (node == job.spec.self || peers[node] != peer.id) continue;
      job.op->abort(unavailable(nodeName(node) + " " + reason));
      break;
    }
  }
  // Abort first (the ops' outcomes name the peer), then end what is left with it: a request into
  // a stopped peer may never end otherwise, while a disconnected peer's requests end at once.
  if (peer.beatRecv != 0) (void)transport_->cancel(peer.beatRecv);
  if (disconnect) (void)transport_->disconnect(peer.id);
  nextHousekeeping_ = Clock::time_point::min();
}

void ProgressLoop::housekeeping(Clock::time_point now) {
  if (now >= nextBeat_) {
    for (auto& [id, peer] : peers_) {
      if (!peer->failed) sendBeat(*peer);
    }
    (void)transport_->discardUnexpected(kBeatTag, transport::kMatchComm);
    nextBeat_ = now + options_.heartbeatInterval;
  }
  Clock::time_point next = nextBeat_;
  if (sweepUnexpected(now)) next = std::min(next, now + kSweepInterval);
  for (auto it = draining_.begin(); it != draining_.end();) {
    (void)transport_->discardUnexpected(it->first, transport::kMatchCommSeq);
    if (now >= it->second) {
      it = draining_.erase(it);
    } else {
      next = std::min(next, now + kDrainInterval);
      ++it;
    }
  }
  if (options_.silenceTimeout.count() > 0) {
    for (auto& [id, entry] : peers_) {
      Peer& peer = *entry;
      // Only a peer we wait for, and that has spoken before, can be silent.
      if (peer.failed || !peer.heard || peer.runningJobs == 0) continue;
      const Clock::time_point deadline =
          std::max(peer.lastHeard, peer.watchedSince) + options_.silenceTimeout;
      if (now >= deadline) {
        failPeer(peer, "silent for " + std::to_string(millis(now - peer.lastHeard)) + " ms",
                 /*disconnect=*/true);
      } else {
        next = std::min(next, deadline);
      }
    }
  }
  nextHousekeeping_ = next;
}

bool ProgressLoop::sweepUnexpected(Clock::time_point now) {
  struct Held {
    size_t messages = 0;
    size_t bytes = 0;
  };
  std::unordered_map<transport::PeerId, Held> held;
  size_t stale = 0, unknown = 0, overLimit = 0;
  (void)transport_->dropUnexpected([&](const transport::UnexpectedMessage& m) {
    switch (identities_->lookup(m.tag.comm)) {
      case CommIdentities::Known::Reserved:
      case CommIdentities::Known::Live:
        return false;  // its receive comes (heartbeats have their own discard)
      case CommIdentities::Known::Retired:
        ++stale;
        return true;
      case CommIdentities::Known::Unknown:
        break;
    }
    if (now - m.arrived >= options_.holdUnknownFor) {
      ++unknown;
      return true;
    }
    Held& h = held[m.peer];
    if (h.messages + 1 > options_.heldMessagesPerPeer ||
        h.bytes + m.bytes > options_.heldBytesPerPeer) {
      ++overLimit;
      return true;
    }
    ++h.messages;
    h.bytes += m.bytes;
    return false;
  });
  for (auto [reason, count] : {std::pair<const char*, size_t>{"stale", stale},
                               {"unknown", unknown},
                               {"over_limit", overLimit}}) {
    if (count == 0) continue;
    spdlog::warn("net executor: dropped {} message(s) unread: {}", count,
                 std::string_view(reason) == "stale" ? "their communicator is gone here"
                 : std::string_view(reason) == "unknown"
                     ? "no communicator here took their identity in time"
                     : "too many held for communicators not formed here yet");
    if (options_.onDropped) options_.onDropped(reason, count);
  }
  return !held.empty();
}

void ProgressLoop::checkStall(Clock::time_point now) {
  if (options_.silenceTimeout.count() == 0 || now - lastPass_ <= options_.silenceTimeout / 2) {
    return;
  }
  // Passes are never further apart than a heartbeat interval (a quarter of the timeout) unless
  // this thread did not run: heartbeats may be waiting unread, so nobody can be judged yet.
  spdlog::warn(
      "net executor: the progress thread did not run for {} ms; restarting the silence "
      "clocks",
      millis(now - lastPass_));
  for (auto& [id, peer] : peers_) {
    if (peer->heard) peer->lastHeard = now;
  }
}

}  // namespace hc::coll::net::detail
