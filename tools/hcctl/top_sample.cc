#include "tools/hcctl/top_sample.h"

#include <algorithm>

namespace hc::hcctl::top {
namespace {

namespace v1 = hetero_comm::v1;

Status failed(const Target& target, const char* rpc, const grpc::Status& status) {
  const Code code =
      status.error_code() == grpc::StatusCode::UNAVAILABLE ? Code::Unavailable : Code::RemoteError;
  return Status(code, std::string("Control.") + rpc + " at " + target.uri() +
                          " failed: " + status.error_message() + " (gRPC code " +
                          std::to_string(status.error_code()) + ")");
}

// Some local rank posted an operation that has not finished.
bool outstanding(const v1::Communicator& c) {
  return std::any_of(c.ranks().begin(), c.ranks().end(), [](const v1::RankProgress& p) {
    return p.collectives_posted() > p.collectives_finished() || p.p2p_posted() > p.p2p_finished();
  });
}

CommSample commOf(const v1::Communicator& c) {
  CommSample out;
  out.id = c.id();
  out.key = c.key();
  out.nranks = c.nranks();
  out.localRanks.assign(c.local_ranks().begin(), c.local_ranks().end());
  out.state = c.state();
  out.opsCompleted = c.ops_completed();
  out.opsFailed = c.ops_failed();
  out.bytesCompleted = c.bytes_completed();
  // Record ids count in posting order across the local ranks: the largest is the newest.
  const v1::FlightEntry* newest = nullptr;
  for (const v1::RankProgress& p : c.ranks()) {
    if (!p.has_last_posted()) continue;
    if (newest == nullptr || p.last_posted().record_id() > newest->record_id()) {
      newest = &p.last_posted();
    }
  }
  if (newest != nullptr) {
    std::string name = newest->profiling_name();
    if (name.starts_with("nccl:")) name.erase(0, 5);
    out.lastOp = LastOp{std::move(name),
                        newest->is_p2p() ? newest->p2p_seq_id() : newest->collective_seq_id(),
                        newest->state(), newest->time_created_ns()};
  }
  return out;
}

}  // namespace

ControlSampler::ControlSampler(const Target& target, std::shared_ptr<grpc::Channel> channel)
    : target_(target), stub_(v1::Control::NewStub(std::move(channel))) {}

Result<Source> ControlSampler::source() {
  v1::NodeInfo node;
  auto context = rpcContext(target_);
  grpc::Status status = stub_->GetNode(context.get(), v1::GetNodeRequest(), &node);
  if (!status.ok()) return failed(target_, "GetNode", status);
  Source out;
  out.hostname = node.hostname();
  out.version = node.version();
  out.target = target_.uri();
  return out;
}

Result<Sample> ControlSampler::sample() {
  Sample out;
  out.taken = std::chrono::steady_clock::now();
  out.wallNs = wallClockNs();
  v1::GetStatsResponse stats;
  auto statsContext = rpcContext(target_);
  grpc::Status status = stub_->GetStats(statsContext.get(), v1::GetStatsRequest(), &stats);
  if (!status.ok()) return failed(target_, "GetStats", status);
  out.uptimeMs = stats.uptime_ms();
  out.clients = stats.clients();
  v1::ListCommunicatorsResponse list;
  auto listContext = rpcContext(target_);
  status = stub_->ListCommunicators(listContext.get(), v1::ListCommunicatorsRequest(), &list);
  if (!status.ok()) return failed(target_, "ListCommunicators", status);
  for (const v1::Communicator& c : list.communicators()) {
    out.comms.push_back(commOf(c));
    if (outstanding(c)) askWhoIsWaited(out.comms.back());
  }
  std::sort(out.comms.begin(), out.comms.end(),
            [](const CommSample& a, const CommSample& b) { return a.id < b.id; });
  return out;
}

void ControlSampler::askWhoIsWaited(CommSample& comm) {
  v1::TraceCommunicatorRequest request;
  request.set_communicator(std::to_string(comm.id));
  v1::TraceCommunicatorResponse trace;
  auto context = rpcContext(target_);
  grpc::Status status = stub_->TraceCommunicator(context.get(), request, &trace);
  if (!status.ok()) {
    // Gone between the two calls: nothing outstanding any more.
    if (status.error_code() != grpc::StatusCode::NOT_FOUND)
      comm.waitingError = status.error_message();
    return;
  }
  comm.waitingSeq = trace.waiting_collective_seq_id();
  comm.waitingFor.assign(trace.missing().begin(), trace.missing().end());
}

}  // namespace hc::hcctl::top
