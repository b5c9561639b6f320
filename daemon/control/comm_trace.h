// CommTrace: "who has not posted": every daemon of a communicator reports its ranks' progress
// (observe::RankProgress); traceVerdict() names the first collective some rank has not finished
// and the ranks that have not posted it. fetchCommProgress() asks one other daemon
// (Peer.Challenge, then Peer.GetCommProgress with the membership proof). Used by
// Control.TraceCommunicator.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/control/cluster_token.h"
#include "daemon/observe/flight_recorder.h"
#include "hetero_comm/v1/control.pb.h"

namespace hc::control {

struct NodeReport {
  std::string address;
  Status reached;  // Ok, or why the daemon did not answer
  std::vector<observe::RankProgress> ranks;
};

// Fills the verdict fields of `out` (waiting_collective_seq_id, waiting_profiling_name, posted,
// missing, unknown, summary) and its nodes from the reports of every daemon.
void traceVerdict(int nranks, const std::vector<NodeReport>& nodes,
                  hetero_comm::v1::TraceCommunicatorResponse* out);

// Blocking: returns by now + timeout.
[[nodiscard]] Result<std::vector<observe::RankProgress>> fetchCommProgress(
    const ClusterToken& token, const std::string& address, uint64_t identity,
    const std::string& key, std::chrono::milliseconds timeout);

// The protobuf forms, shared by the Control RPCs.
void toProto(const observe::FlightEntry& entry, hetero_comm::v1::FlightEntry* out);
void toProto(const observe::RankProgress& progress, hetero_comm::v1::RankProgress* out);

}  // namespace hc::control
