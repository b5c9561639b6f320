// ControlService: hetero_comm.v1.Control with the callback API. GetNode answers from a NodeInfo
// taken at startup (plus the uptime); ListClients, ListCommunicators, GetFlightRecord and
// GetStats from the status board the IPC thread keeps; TraceCommunicator asks the other daemons
// of the communicator on a thread of its own (control_lists.cc). Everything about clients and
// communicators is limited to what the caller may see (caller.h): its own uid's, or all for an
// admin; a communicator it may not see is answered NOT_FOUND, as one that does not exist.
// MeasureDevices times the GPUs again on a thread of its own (admins only).
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "daemon/control/caller.h"
#include "daemon/control/cluster_token.h"
#include "daemon/control/node_info.h"
#include "daemon/observe/status_board.h"
#include "hetero_comm/v1/control.grpc.pb.h"

namespace hc::control {

// What the Control RPCs beyond GetNode read. All optional: without a board they answer
// UNAVAILABLE, without a token TraceCommunicator reports the other daemons unreachable.
struct ControlSources {
  const observe::StatusBoard* board = nullptr;  // borrowed: outlives the service
  std::shared_ptr<const ClusterToken> token;    // the Peer cluster token, for other daemons
  std::string selfAddress;                      // this daemon's Peer address ("" = none)
  std::chrono::milliseconds peerTimeout{2000};  // per daemon asked by TraceCommunicator
  // Who is on each admin-socket connection (ControlServer fills it). Without it every caller is
  // unknown and sees nothing of any tenant.
  std::shared_ptr<const CallerRegistry> callers;
  // The GPU rows as they are now (their measured speeds change after startup). Without it
  // GetNode answers NodeInfo's rows.
  std::function<std::vector<NodeGpu>()> gpus;
  // Measures every GPU again, blocking for tens of milliseconds per GPU, and returns the rows.
  // Without it MeasureDevices answers UNIMPLEMENTED.
  std::function<std::vector<NodeGpu>()> measureGpus;
};

class ControlService final : public hetero_comm::v1::Control::CallbackService {
 public:
  explicit ControlService(NodeInfo node, ControlSources sources = {})
      : node_(std::move(node)), sources_(std::move(sources)) {}
  ~ControlService() override;  // waits for the traces under way

  // hetero_comm::v1::Control::CallbackService. Run on gRPC's callback threads; never block.
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* context,
                                    const hetero_comm::v1::GetNodeRequest* request,
                                    hetero_comm::v1::NodeInfo* response) override;
  grpc::ServerUnaryReactor* ListClients(grpc::CallbackServerContext* context,
                                        const hetero_comm::v1::ListClientsRequest* request,
                                        hetero_comm::v1::ListClientsResponse* response) override;
  grpc::ServerUnaryReactor* ListCommunicators(
      grpc::CallbackServerContext* context, const hetero_comm::v1::ListCommunicatorsRequest* request,
      hetero_comm::v1::ListCommunicatorsResponse* response) override;
  grpc::ServerUnaryReactor* GetFlightRecord(
      grpc::CallbackServerContext* context, const hetero_comm::v1::GetFlightRecordRequest* request,
      hetero_comm::v1::GetFlightRecordResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const hetero_comm::v1::GetStatsRequest* request,
                                     hetero_comm::v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* TraceCommunicator(
      grpc::CallbackServerContext* context, const hetero_comm::v1::TraceCommunicatorRequest* request,
      hetero_comm::v1::TraceCommunicatorResponse* response) override;
  // Admins only (it occupies every GPU of the node for a moment): PERMISSION_DENIED for others.
  grpc::ServerUnaryReactor* MeasureDevices(
      grpc::CallbackServerContext* context, const hetero_comm::v1::MeasureDevicesRequest* request,
      hetero_comm::v1::MeasureDevicesResponse* response) override;

 private:
  // Who makes the call: the admin socket's registry for "fd:N" peers, an admin for a TCP peer
  // whose certificate mutual TLS verified, unknown otherwise.
  Caller callerOf(const grpc::CallbackServerContext& context) const;
  // The communicators `caller` may see, by id.
  std::vector<std::shared_ptr<const observe::FlightRecorder>> visibleComms(
      const Caller& caller) const;
  // The communicator a request names among those the caller may see, or NOT_FOUND / UNAVAILABLE.
  Result<std::shared_ptr<const observe::FlightRecorder>> findComm(const std::string& name,
                                                                  const Caller& caller) const;
  void trace(std::shared_ptr<const observe::FlightRecorder> comm,
             hetero_comm::v1::TraceCommunicatorResponse* response, grpc::ServerUnaryReactor* reactor);

  const NodeInfo node_;  // read-only after construction: any thread may read it
  const ControlSources sources_;
  // Traces and measurements under way, each on a thread of its own; the destructor waits.
  std::mutex tracesMutex_;
  std::condition_variable tracesDone_;
  int tracesRunning_ = 0;
};

// The protobuf form of `node`, with the uptime at `now`. Exposed for tests.
void toProto(const NodeInfo& node, std::chrono::steady_clock::time_point now,
             hetero_comm::v1::NodeInfo* out);

}  // namespace hc::control
