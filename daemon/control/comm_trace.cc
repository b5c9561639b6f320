#include "daemon/control/comm_trace.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>

#include "daemon/control/grpc_status.h"
#include "daemon/control/membership_proof.h"
#include "daemon/control/peer_convert.h"
#include "daemon/observe/flight_json.h"
#include "hetero_comm/v1/peer.grpc.pb.h"

namespace hc::control {
namespace {

std::string rankList(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

observe::RankProgress fromProto(const hetero_comm::v1::PeerRankProgress& p) {
  observe::RankProgress out;
  out.rank = static_cast<int>(p.rank());
  out.collectivesPosted = p.collectives_posted();
  out.collectivesFinished = p.collectives_finished();
  out.transfersPosted = p.p2p_posted();
  out.transfersFinished = p.p2p_finished();
  if (!p.last_profiling_name().empty()) {
    observe::FlightEntry last;
    last.profilingName = p.last_profiling_name();
    last.collectiveSeqId = p.last_collective_seq_id();
    last.p2pSeqId = p.last_p2p_seq_id();
    for (auto state : {observe::FlightState::Scheduled, observe::FlightState::Started,
                       observe::FlightState::Completed, observe::FlightState::Failed}) {
      if (p.last_state() == observe::flightStateName(state)) last.state = state;
    }
    out.lastPosted = last;
  }
  return out;
}

}  // namespace

void toProto(const observe::FlightEntry& e, hetero_comm::v1::FlightEntry* out) {
  out->set_record_id(e.recordId);
  out->set_collective_seq_id(e.collectiveSeqId);
  out->set_p2p_seq_id(e.p2pSeqId);
  out->set_profiling_name(e.profilingName);
  out->set_time_created_ns(e.timeCreatedNs);
  for (int64_t n : e.what.inputSizes) out->add_input_sizes(n);
  for (int64_t n : e.what.outputSizes) out->add_output_sizes(n);
  if (!e.what.dtype.empty()) {
    if (!e.what.inputSizes.empty()) out->add_input_dtypes(observe::pytorchDtypeName(e.what.dtype));
    if (!e.what.outputSizes.empty()) out->add_output_dtypes(observe::pytorchDtypeName(e.what.dtype));
  }
  out->set_state(observe::flightStateName(e.state));
  out->set_time_discovered_started_ns(e.timeDiscoveredStartedNs);
  out->set_time_discovered_completed_ns(e.timeDiscoveredCompletedNs);
  out->set_rank(e.what.rank);
  out->set_peer(e.what.peer);
  out->set_error(e.error);
  out->set_is_p2p(e.what.p2p);
}

void toProto(const observe::RankProgress& p, hetero_comm::v1::RankProgress* out) {
  out->set_rank(p.rank);
  out->set_collectives_posted(p.collectivesPosted);
  out->set_collectives_finished(p.collectivesFinished);
  out->set_p2p_posted(p.transfersPosted);
  out->set_p2p_finished(p.transfersFinished);
  if (p.lastPosted) toProto(*p.lastPosted, out->mutable_last_posted());
}

void traceVerdict(int nranks, const std::vector<NodeReport>& nodes,
                  hetero_comm::v1::TraceCommunicatorResponse* out) {
  out->set_nranks(nranks);
  std::map<int, const observe::RankProgress*> byRank;
  for (const NodeReport& node : nodes) {
    hetero_comm::v1::NodeProgress* row = out->add_nodes();
    row->set_address(node.address);
    row->set_reachable(node.reached.isOk());
    row->set_error(node.reached.isOk() ? "" : node.reached.toString());
    for (const observe::RankProgress& p : node.ranks) {
      toProto(p, row->add_ranks());
      byRank[p.rank] = &p;
    }
  }
  // Collective k (from 0) finishes on every rank together, so the first one some rank has not
  // finished is the smallest finished count; the ranks that posted fewer than k+1 have not
  // posted it.
  uint64_t first = UINT64_MAX;
  for (const auto& [rank, p] : byRank) first = std::min(first, p->collectivesFinished);
  std::vector<int32_t> posted, missing, unknown;
  std::string name;
  for (int r = 0; r < nranks; ++r) {
    auto it = byRank.find(r);
    if (it == byRank.end()) {
      unknown.push_back(r);
    } else if (it->second->collectivesPosted > first) {
      posted.push_back(r);
      if (it->second->lastPosted && it->second->lastPosted->collectiveSeqId == first + 1) {
        name = it->second->lastPosted->profilingName;
      }
    } else {
      missing.push_back(r);
    }
  }
  if (posted.empty()) missing.clear();  // nobody waits: nobody is missing
  for (int32_t r : posted) out->add_posted(r);
  for (int32_t r : missing) out->add_missing(r);
  for (int32_t r : unknown) out->add_unknown(r);
  std::string summary;
  if (byRank.empty() || posted.empty()) {
    summary = "no collective is waiting: every posted collective finished";
  } else {
    out->set_waiting_collective_seq_id(first + 1);
    out->set_waiting_profiling_name(name);
    // Named as the flight record numbers it (PyTorch's collective_seq_id, from 1).
    summary = "collective_seq_id " + std::to_string(first + 1) + (name.empty() ? "" : " (" + name + ")");
    summary += missing.empty() ? ": every known rank posted it"
                               : ": ranks " + rankList(missing) + " have not posted it";
    summary += " (posted by " + rankList(posted) + ")";
  }
  if (!unknown.empty()) {
    summary += "; ranks " + rankList(unknown) + " are on daemons that did not answer";
  }
  out->set_summary(summary);
}

Result<std::vector<observe::RankProgress>> fetchCommProgress(const ClusterToken& token,
                                                             const std::string& address,
                                                             uint64_t identity,
                                                             const std::string& key,
                                                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = hetero_comm::v1::Peer::NewStub(channel);
  hetero_comm::v1::ChallengeResponse challenge;
  {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    grpc::Status s = stub->Challenge(&context, hetero_comm::v1::ChallengeRequest{}, &challenge);
    if (!s.ok()) return fromGrpcStatus(s, "Peer.Challenge at " + address);
  }
  Result<Nonce> nonce = nonceOf(challenge.nonce(), "nonce");
  if (!nonce.isOk()) return nonce.status();
  hetero_comm::v1::CommProgressRequest request;
  request.set_comm_key(key);
  request.set_identity(identity);
  request.set_nonce(challenge.nonce());
  const Proof proof = computeProgressProof(token, nonce.value(), identity, key);
  request.set_proof(proof.data(), proof.size());
  hetero_comm::v1::CommProgressResponse response;
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::Status s = stub->GetCommProgress(&context, request, &response);
  if (!s.ok()) return fromGrpcStatus(s, "Peer.GetCommProgress at " + address);
  std::vector<observe::RankProgress> out;
  for (const auto& p : response.ranks()) out.push_back(fromProto(p));
  return out;
}

}  // namespace hc::control
