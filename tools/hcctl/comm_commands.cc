// hcctl clients, comms, trace, record and stats: the Control RPCs over the daemon's status board.
// Text for people; --json prints the response with the proto's field names (PyTorch's
// flight-recorder names for operations: record_id, collective_seq_id, profiling_name, ...).
#include <google/protobuf/util/json_util.h>

#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "hetero_comm/v1/control.grpc.pb.h"
#include "tools/hcctl/commands.h"

namespace hc::hcctl {
namespace {

namespace v1 = hetero_comm::v1;
using Stub = v1::Control::Stub;

// Calls one Control RPC; prints why it failed and returns the exit code.
template <class Request, class Response>
int call(const Target& target, const char* name,
         grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
         const Request& request, Response* response) {
  auto channel = connect(target);
  if (!channel) return kExitConnectFailed;
  auto stub = v1::Control::NewStub(channel);
  auto context = rpcContext(target);
  grpc::Status status = ((*stub).*method)(context.get(), request, response);
  if (!status.ok()) {
    std::cerr << "hcctl: Control." << name << " at " << target.uri()
              << " failed: " << status.error_message() << " (gRPC code " << status.error_code()
              << ")\n";
    return kExitRpcFailed;
  }
  return kExitOk;
}

void printJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  std::cout << text;
  if (text.empty() || text.back() != '\n') std::cout << "\n";
}

std::string joinInts(const google::protobuf::RepeatedField<int32_t>& values) {
  std::string out;
  for (int32_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out.empty() ? "-" : out;
}

std::string lastOp(const v1::RankProgress& p) {
  if (!p.has_last_posted()) return "-";
  const v1::FlightEntry& e = p.last_posted();
  const uint64_t seq = e.is_p2p() ? e.p2p_seq_id() : e.collective_seq_id();
  return e.profiling_name() + " #" + std::to_string(seq) + " " + e.state();
}

}  // namespace

int runClients(const Target& target, bool json) {
  v1::ListClientsResponse response;
  if (int code = call(target, "ListClients", &Stub::ListClients, v1::ListClientsRequest(), &response);
      code != kExitOk) {
    return code;
  }
  if (json) {
    printJson(response);
    return kExitOk;
  }
  std::cout << std::left << std::setw(6) << "ID" << std::setw(9) << "PID" << std::setw(7) << "UID"
            << std::setw(24) << "NAME" << "COMMUNICATORS\n";
  for (const v1::Client& c : response.clients()) {
    std::string comms;
    for (uint64_t id : c.communicators()) comms += (comms.empty() ? "" : ",") + std::to_string(id);
    std::cout << std::setw(6) << c.id() << std::setw(9) << c.pid() << std::setw(7) << c.uid()
              << std::setw(24) << (c.name().empty() ? "-" : c.name()) << (comms.empty() ? "-" : comms)
              << "\n";
  }
  return kExitOk;
}

int runComms(const Target& target, bool json) {
  v1::ListCommunicatorsResponse response;
  if (int code = call(target, "ListCommunicators", &Stub::ListCommunicators,
                      v1::ListCommunicatorsRequest(), &response);
      code != kExitOk) {
    return code;
  }
  if (json) {
    printJson(response);
    return kExitOk;
  }
  std::cout << std::left << std::setw(5) << "ID" << std::setw(34) << "KEY" << std::setw(7)
            << "RANKS" << std::setw(7) << "NODES" << std::setw(8) << "LOCAL" << std::setw(8)
            << "STATE" << std::setw(11) << "COMPLETED" << "LAST OP PER LOCAL RANK\n";
  for (const v1::Communicator& c : response.communicators()) {
    std::string last;
    for (const v1::RankProgress& p : c.ranks()) {
      last += (last.empty() ? "" : "; ") + std::to_string(p.rank()) + ": " + lastOp(p);
    }
    std::cout << std::setw(5) << c.id() << std::setw(34) << c.key() << std::setw(7) << c.nranks()
              << std::setw(7) << c.nodes() << std::setw(8) << joinInts(c.local_ranks())
              << std::setw(8) << c.state() << std::setw(11) << c.ops_completed()
              << (last.empty() ? "-" : last) << "\n";
    if (!c.failure().empty()) std::cout << "     failure: " << c.failure() << "\n";
  }
  return kExitOk;
}

int runTrace(const Target& target, const std::string& comm, bool json) {
  v1::TraceCommunicatorRequest request;
  request.set_communicator(comm);
  v1::TraceCommunicatorResponse response;
  if (int code = call(target, "TraceCommunicator", &Stub::TraceCommunicator, request, &response);
      code != kExitOk) {
    return code;
  }
  if (json) {
    printJson(response);
    return kExitOk;
  }
  std::cout << "communicator " << response.key() << " (" << response.nranks() << " ranks)\n"
            << response.summary() << "\n\n";
  std::cout << std::left << std::setw(26) << "DAEMON" << std::setw(6) << "RANK" << std::setw(11)
            << "POSTED" << std::setw(11) << "FINISHED" << "LAST POSTED\n";
  for (const v1::NodeProgress& node : response.nodes()) {
    const std::string name = node.address().empty() ? "(this daemon)" : node.address();
    if (!node.reachable()) {
      std::cout << std::setw(26) << name << "unreachable: " << node.error() << "\n";
      continue;
    }
    for (const v1::RankProgress& p : node.ranks()) {
      std::cout << std::setw(26) << name << std::setw(6) << p.rank() << std::setw(11)
                << p.collectives_posted() << std::setw(11) << p.collectives_finished()
                << lastOp(p) << "\n";
    }
  }
  return kExitOk;
}

int runRecord(const Target& target, const std::string& comm, uint32_t last) {
  v1::GetFlightRecordRequest request;
  request.set_communicator(comm);
  request.set_last(last);
  v1::GetFlightRecordResponse response;
  if (int code = call(target, "GetFlightRecord", &Stub::GetFlightRecord, request, &response);
      code != kExitOk) {
    return code;
  }
  printJson(response);
  return kExitOk;
}

int runStats(const Target& target, bool json) {
  v1::GetStatsResponse response;
  if (int code = call(target, "GetStats", &Stub::GetStats, v1::GetStatsRequest(), &response);
      code != kExitOk) {
    return code;
  }
  if (json) {
    printJson(response);
    return kExitOk;
  }
  std::cout << "uptime_ms:             " << response.uptime_ms() << "\n"
            << "clients:               " << response.clients() << " (accepted "
            << response.clients_accepted() << ")\n"
            << "communicators:         " << response.communicators() << " (created "
            << response.communicators_created() << ")\n"
            << "ops completed, failed: " << response.ops_completed() << ", "
            << response.ops_failed() << "\n"
            << "flight record dumps:   " << response.flight_dumps() << "\n";
  return kExitOk;
}

}  // namespace hc::hcctl
