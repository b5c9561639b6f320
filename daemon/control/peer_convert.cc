#include "daemon/control/peer_convert.h"

#include <algorithm>

namespace hc::control {
namespace {

void toProto(const peer::NodeIdentity& node, hetero_comm::v1::NodeIdentity* out) {
  out->set_hostname(node.hostname);
  out->set_boot_id(node.bootId);
  out->set_instance(node.instance);
}

peer::NodeIdentity fromProto(const hetero_comm::v1::NodeIdentity& message) {
  return {message.hostname(), message.boot_id(), message.instance()};
}

}  // namespace

void toProto(const peer::JoinRequest& join, const Nonce& rootNonce, const Nonce& joinerNonce,
             const Proof& proof, hetero_comm::v1::JoinRequest* out) {
  out->set_comm_key(join.key.data(), join.key.size());
  out->set_nranks(join.nranks);
  out->mutable_ranks()->Assign(join.ranks.begin(), join.ranks.end());
  toProto(join.node, out->mutable_node());
  out->set_transport_address(join.transportAddress);
  out->set_timeout_ms(static_cast<uint32_t>(join.timeout.count()));
  out->set_wire_version(join.wireVersion);
  out->set_agreement(join.agreement);
  out->set_nonce(rootNonce.data(), rootNonce.size());
  out->set_joiner_nonce(joinerNonce.data(), joinerNonce.size());
  out->set_proof(proof.data(), proof.size());
}

Result<peer::JoinRequest> fromProto(const hetero_comm::v1::JoinRequest& message) {
  if (message.comm_key().size() != peer::kCommKeyBytes) {
    return invalidArgument("comm_key has " + std::to_string(message.comm_key().size()) +
                           " bytes, not " + std::to_string(peer::kCommKeyBytes));
  }
  peer::JoinRequest join;
  std::copy_n(message.comm_key().begin(), peer::kCommKeyBytes, join.key.begin());
  join.nranks = message.nranks();
  join.ranks.assign(message.ranks().begin(), message.ranks().end());
  join.node = fromProto(message.node());
  join.transportAddress = message.transport_address();
  join.timeout = std::chrono::milliseconds(message.timeout_ms());
  // A daemon from before wire versions states none: it speaks version 1.
  join.wireVersion = message.wire_version() == 0 ? 1 : message.wire_version();
  join.agreement = message.agreement();
  return join;
}

void toProto(const peer::RankTable& table, hetero_comm::v1::RankTable* out) {
  out->set_nranks(table.nranks);
  out->set_identity(table.identity);
  for (const peer::RankPlacement& p : table.ranks) {
    hetero_comm::v1::RankPlacement* placement = out->add_ranks();
    placement->set_node(p.node);
    placement->set_local_rank(p.localRank);
  }
  for (const peer::NodeEntry& node : table.nodes) {
    hetero_comm::v1::NodeEntry* entry = out->add_nodes();
    toProto(node.identity, entry->mutable_identity());
    entry->set_transport_address(node.transportAddress);
    entry->mutable_ranks()->Assign(node.ranks.begin(), node.ranks.end());
  }
}

Result<peer::RankTable> fromProto(const hetero_comm::v1::RankTable& message) {
  peer::RankTable table;
  table.nranks = message.nranks();
  table.identity = message.identity();
  for (const auto& p : message.ranks()) table.ranks.push_back({p.node(), p.local_rank()});
  for (const auto& node : message.nodes()) {
    table.nodes.push_back({fromProto(node.identity()),
                           node.transport_address(),
                           {node.ranks().begin(), node.ranks().end()}});
  }
  HC_RETURN_IF_ERROR(peer::validateRankTable(table));
  return table;
}

Result<Nonce> nonceOf(const std::string& field, const char* what) {
  if (field.size() != kNonceBytes) {
    return invalidArgument(std::string(what) + " has " + std::to_string(field.size()) +
                           " bytes, not " + std::to_string(kNonceBytes));
  }
  Nonce nonce{};
  std::copy(field.begin(), field.end(), nonce.begin());
  return nonce;
}

}  // namespace hc::control
