// StatusBoard: what the control plane reads about the daemon's live state: the connected clients
// and the communicators with their flight recorders. The IPC thread writes it as sessions and
// communicators come and go; gRPC threads read it. Depends on hc_common only, so that the control
// services (daemon/control) can read it without the engine.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "daemon/observe/flight_recorder.h"

namespace hc::observe {

struct ClientInfo {
  uint32_t id = 0;  // the session id ("client 3" in logs)
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  // what the client called itself in Hello ("" before it)
  int64_t connectedNs = 0;  // wall clock
  uint64_t segmentBytes = 0;
  uint64_t opsSubmitted = 0;
  uint64_t opsCompleted = 0;
  std::vector<uint64_t> comms;  // ids of the communicators it holds ranks of
};

// Daemon-wide totals since start, for Control.GetStats.
struct BoardTotals {
  uint64_t clientsAccepted = 0;
  uint64_t commsCreated = 0;
  uint64_t opsCompleted = 0;
  uint64_t opsFailed = 0;
  uint64_t flightDumps = 0;
};

class StatusBoard {
 public:
  // IPC thread.
  void clientConnected(ClientInfo info);
  void clientUpdated(uint32_t id, const std::string& name, uint64_t segmentBytes);
  void clientCounted(uint32_t id, uint64_t submitted, uint64_t completed);
  void clientJoined(uint32_t id, uint64_t commId);
  void clientGone(uint32_t id);
  // A new communicator and its recorder (kept `entriesPerRank` per local rank).
  std::shared_ptr<FlightRecorder> commCreated(CommIdentity comm, size_t entriesPerRank);
  void commGone(uint64_t id);
  void opFinished(bool ok);
  void flightDumped();

  // Any thread.
  std::vector<ClientInfo> clients() const;
  std::vector<std::shared_ptr<const FlightRecorder>> comms() const;
  // By local id ("7"), or by key: the 32 hex digits or a unique prefix of at least 4.
  std::shared_ptr<const FlightRecorder> findComm(const std::string& idOrKey) const;
  BoardTotals totals() const;
  // The uids of the clients that held ranks of communicator `id` (clientJoined), kept until the
  // communicator goes even when those clients left first: whose record it is, for Control.
  std::set<uid_t> commOwners(uint64_t id) const;

 private:
  mutable std::mutex mutex_;
  std::map<uint32_t, ClientInfo> clients_;
  std::map<uint64_t, std::shared_ptr<FlightRecorder>> comms_;
  std::map<uint64_t, std::set<uid_t>> commOwners_;
  BoardTotals totals_;
};

}  // namespace hc::observe
