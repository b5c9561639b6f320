// CommObserver: what operators see of the engine's communicators: each one's flight recorder on
// the status board, its incidents (a late operation, a failure with work outstanding) logged and
// dumped as JSON into the state directory, the staging counters, and the peer daemons found
// unreachable (the Peers health status).
// Runs on the IPC thread; the dumps are written on the FlightDumper's own thread.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/observe/flight_dumper.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_options.h"

namespace hc::session {

class CommObserver {
 public:
  // Borrowed: the engine's options outlive this object. selfInstance: this daemon's instance
  // name among the daemons (MultiNode::identity), never counted as a lost peer.
  CommObserver(const EngineOptions* options, std::string selfInstance);
  ~CommObserver();
  CommObserver(const CommObserver&) = delete;
  CommObserver& operator=(const CommObserver&) = delete;

  // Gives a new communicator (its members set) its flight recorder on the board, under the key
  // every daemon of it knows it by (comm_keys.h), and the incident handler (log, dump).
  // wireIdentity names it among its daemons (0: it runs on this daemon only); nodeAddresses and
  // ranksOfNode as in CommIdentity (empty on one daemon).
  void observe(const std::shared_ptr<Communicator>& comm, std::string keyHex,
               uint64_t wireIdentity = 0, std::vector<std::string> nodeAddresses = {},
               std::vector<std::vector<int>> ranksOfNode = {});
  // Metrics: a match whose device operands go through host staging, and why.
  void countStaging(const Match& match, const char* reason);
  // The daemon that holds node `node` of `comm` went away.
  void peerLost(const Communicator& comm, uint32_t node);

  // Peer daemons (by Peer address) found unreachable since a communicator last formed with them.
  const std::set<std::string>& lostPeers() const { return lostPeers_; }

 private:
  void onIncident(const Communicator& comm, const std::string& reason, const std::string& detail);

  const EngineOptions& options_;
  std::string selfInstance_;
  std::set<std::string> lostPeers_;
  // Writes flight-record dumps off the IPC thread, rate-limited; made at the first incident.
  std::unique_ptr<observe::FlightDumper> dumper_;
};

}  // namespace hc::session
