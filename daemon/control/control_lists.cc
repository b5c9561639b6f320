// ControlService: the RPCs that read the status board (clients, communicators, flight records,
// totals) and TraceCommunicator, which also asks every other daemon of the communicator.
#include <algorithm>
#include <future>
#include <thread>

#include "daemon/control/comm_trace.h"
#include "daemon/control/control_service.h"
#include "daemon/control/grpc_status.h"

namespace hc::control {
namespace {

using hetero_comm::v1::Communicator;

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(toGrpcStatus(status));
  return reactor;
}

void describeComm(const observe::FlightSnapshot& s, Communicator* out) {
  out->set_id(s.comm.id);
  out->set_key(s.comm.keyHex);
  out->set_identity(s.comm.wireIdentity);
  out->set_nranks(s.comm.nranks);
  for (int r : s.comm.localRanks) out->add_local_ranks(r);
  out->set_nodes(static_cast<uint32_t>(s.comm.nodes()));
  out->set_state(s.state);
  out->set_failure(s.failure);
  out->set_ops_completed(s.opsCompleted);
  out->set_ops_failed(s.opsFailed);
  out->set_bytes_completed(s.bytesCompleted);
  for (const observe::RankProgress& p : s.ranks) toProto(p, out->add_ranks());
  for (const std::string& a : s.comm.nodeAddresses) out->add_node_addresses(a);
}

const Status kNoBoard = unavailable("this daemon keeps no status board");

}  // namespace

ControlService::~ControlService() {
  std::unique_lock lock(tracesMutex_);
  tracesDone_.wait(lock, [&] { return tracesRunning_ == 0; });
}

Caller ControlService::callerOf(const grpc::CallbackServerContext& context) const {
  const std::string peer = context.peer();
  if (peer.starts_with("fd:")) {
    return sources_.callers ? sources_.callers->lookup(peer) : Caller::unknown();
  }
  // TCP: only a certificate the client CA signed says who is calling; such an operator was given
  // the node, as root is on the admin socket.
  const auto auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) return Caller::admin(0);
  return Caller::unknown();
}

std::vector<std::shared_ptr<const observe::FlightRecorder>> ControlService::visibleComms(
    const Caller& caller) const {
  auto comms = sources_.board->comms();
  if (!caller.seesEverything()) {
    std::erase_if(comms, [&](const auto& comm) {
      return !caller.seesAny(sources_.board->commOwners(comm->identity().id));
    });
  }
  return comms;
}

Result<std::shared_ptr<const observe::FlightRecorder>> ControlService::findComm(
    const std::string& name, const Caller& caller) const {
  if (sources_.board == nullptr) return kNoBoard;
  // Matched among the caller's own communicators only: a key prefix is unique or ambiguous
  // within what the caller may see, and tells nothing about anyone else's keys.
  const auto comms = visibleComms(caller);
  std::shared_ptr<const observe::FlightRecorder> found;
  const bool digits = !name.empty() && name.size() <= 19 &&
                      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    const uint64_t id = std::stoull(name);
    for (const auto& comm : comms) {
      if (comm->identity().id == id) found = comm;
    }
  }
  if (!found && name.size() >= 4) {
    bool ambiguous = false;
    for (const auto& comm : comms) {
      if (!comm->identity().keyHex.starts_with(name)) continue;
      ambiguous = found != nullptr;
      found = comm;
    }
    if (ambiguous) found = nullptr;
  }
  if (!found) {
    return Status(Code::NotFound, "no communicator '" + name +
                                      "' on this daemon (give its id, key or a unique key prefix "
                                      "of 4+ digits; hcctl comms lists them)");
  }
  return found;
}

grpc::ServerUnaryReactor* ControlService::ListClients(
    grpc::CallbackServerContext* context, const hetero_comm::v1::ListClientsRequest*,
    hetero_comm::v1::ListClientsResponse* response) {
  if (sources_.board == nullptr) return finish(context, kNoBoard);
  for (const observe::ClientInfo& c : visibleClients(sources_.board->clients(), callerOf(*context))) {
    hetero_comm::v1::Client* row = response->add_clients();
    row->set_id(c.id);
    row->set_pid(c.pid);
    row->set_uid(c.uid);
    row->set_gid(c.gid);
    row->set_name(c.name);
    row->set_connected_unix_ms(c.connectedNs / 1'000'000);
    row->set_segment_bytes(c.segmentBytes);
    for (uint64_t comm : c.comms) row->add_communicators(comm);
  }
  return finish(context, okStatus());
}

grpc::ServerUnaryReactor* ControlService::ListCommunicators(
    grpc::CallbackServerContext* context, const hetero_comm::v1::ListCommunicatorsRequest*,
    hetero_comm::v1::ListCommunicatorsResponse* response) {
  if (sources_.board == nullptr) return finish(context, kNoBoard);
  for (const auto& comm : visibleComms(callerOf(*context))) {
    describeComm(comm->snapshot(1), response->add_communicators());
  }
  return finish(context, okStatus());
}

grpc::ServerUnaryReactor* ControlService::GetFlightRecord(
    grpc::CallbackServerContext* context, const hetero_comm::v1::GetFlightRecordRequest* request,
    hetero_comm::v1::GetFlightRecordResponse* response) {
  auto comm = findComm(request->communicator(), callerOf(*context));
  if (!comm.isOk()) return finish(context, comm.status());
  const observe::FlightSnapshot snapshot = comm.value()->snapshot(request->last());
  describeComm(snapshot, response->mutable_communicator());
  for (const observe::FlightEntry& e : snapshot.entries) toProto(e, response->add_entries());
  return finish(context, okStatus());
}

grpc::ServerUnaryReactor* ControlService::GetStats(grpc::CallbackServerContext* context,
                                                   const hetero_comm::v1::GetStatsRequest*,
                                                   hetero_comm::v1::GetStatsResponse* response) {
  if (sources_.board == nullptr) return finish(context, kNoBoard);
  // Counts of what the caller may see; the totals since start are the daemon's, and name nobody.
  const Caller caller = callerOf(*context);
  const observe::BoardTotals totals = sources_.board->totals();
  const auto comms = visibleComms(caller);
  response->set_uptime_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                            node_.startedSteady)
          .count()));
  response->set_clients(
      static_cast<uint32_t>(visibleClients(sources_.board->clients(), caller).size()));
  response->set_communicators(static_cast<uint32_t>(comms.size()));
  response->set_clients_accepted(totals.clientsAccepted);
  response->set_communicators_created(totals.commsCreated);
  uint64_t completed = 0, failed = 0;
  for (const auto& comm : comms) {
    const observe::FlightSnapshot s = comm->snapshot(1);
    completed += s.opsCompleted;
    failed += s.opsFailed;
  }
  response->set_ops_completed(completed);
  response->set_ops_failed(failed);
  response->set_flight_dumps(totals.flightDumps);
  return finish(context, okStatus());
}

grpc::ServerUnaryReactor* ControlService::TraceCommunicator(
    grpc::CallbackServerContext* context, const hetero_comm::v1::TraceCommunicatorRequest* request,
    hetero_comm::v1::TraceCommunicatorResponse* response) {
  auto comm = findComm(request->communicator(), callerOf(*context));
  if (!comm.isOk()) return finish(context, comm.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  {
    std::lock_guard lock(tracesMutex_);
    ++tracesRunning_;
  }
  // Other daemons answer over the network: never on gRPC's callback thread.
  std::thread([this, c = std::move(comm.value()), response, reactor] {
    trace(c, response, reactor);
    std::lock_guard lock(tracesMutex_);
    --tracesRunning_;
    tracesDone_.notify_all();
  }).detach();
  return reactor;
}

void ControlService::trace(std::shared_ptr<const observe::FlightRecorder> comm,
                           hetero_comm::v1::TraceCommunicatorResponse* response,
                           grpc::ServerUnaryReactor* reactor) {
  const observe::CommIdentity& id = comm->identity();
  response->set_key(id.keyHex);
  std::vector<NodeReport> reports;
  if (id.nodeAddresses.empty()) {
    reports.push_back({"", okStatus(), comm->snapshot(1).ranks});
  } else {
    std::vector<std::future<Result<std::vector<observe::RankProgress>>>> answers;
    for (const std::string& address : id.nodeAddresses) {
      if (address == sources_.selfAddress) {
        std::promise<Result<std::vector<observe::RankProgress>>> mine;
        mine.set_value(comm->snapshot(1).ranks);
        answers.push_back(mine.get_future());
      } else if (!sources_.token) {
        std::promise<Result<std::vector<observe::RankProgress>>> none;
        none.set_value(unavailable("this daemon has no cluster token to ask other daemons with"));
        answers.push_back(none.get_future());
      } else {
        answers.push_back(std::async(std::launch::async, [this, address, key = id.keyHex,
                                                          identity = id.wireIdentity] {
          return fetchCommProgress(*sources_.token, address, identity, key, sources_.peerTimeout);
        }));
      }
    }
    for (size_t i = 0; i < answers.size(); ++i) {
      auto answer = answers[i].get();
      reports.push_back({id.nodeAddresses[i], answer.status(),
                         answer.isOk() ? std::move(answer).value()
                                       : std::vector<observe::RankProgress>{}});
    }
  }
  traceVerdict(id.nranks, reports, response);
  reactor->Finish(grpc::Status::OK);
}

}  // namespace hc::control
