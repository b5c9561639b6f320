// The bootstrap's vocabulary in plain C++: what a daemon sends when it joins a communicator at
// the root, and the rank table every joiner gets back. Mirrors hetero_comm.v1 in
// proto/hetero_comm/v1/peer.proto (peer_convert.h translates), so callers never see protobuf.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/transport/transport.h"

namespace hc::peer {

constexpr size_t kCommKeyBytes = 16;
using CommKey = std::array<uint8_t, kCommKeyBytes>;

// "0011…ff": for log lines and error messages.
std::string commKeyHex(const CommKey& key);

// Limits the root enforces on a join (a join over them is InvalidArgument).
constexpr uint32_t kMaxRanks = 1u << 20;
constexpr size_t kMaxTransportAddressBytes = 64 * 1024;
constexpr size_t kMaxIdentityFieldBytes = 256;

// Which daemon a join comes from. hostname + bootId name a boot of a machine; instance tells
// apart daemons on one machine (several "nodes" per host in tests).
struct NodeIdentity {
  std::string hostname;
  std::string bootId;
  std::string instance;

  bool operator==(const NodeIdentity&) const = default;
  // An order only so that identities can key maps.
  auto operator<=>(const NodeIdentity&) const = default;
  // "host/boot-id/instance", for messages.
  std::string toString() const;
};

// This machine's hostname and boot id, with the caller's instance label (e.g. the daemon's peer
// listener address). Fails only if neither hostname nor boot id can be read.
[[nodiscard]] Result<NodeIdentity> localNodeIdentity(std::string instance);

// One join: usually one rank (a daemon forwards each local rank's CommInit as its own join), or
// several ranks of one node at once. A daemon sends every join of a communicator with the same
// node identity and transport address; the root merges them into one node.
struct JoinRequest {
  CommKey key{};
  uint32_t nranks = 0;
  // The ranks this join brings, in any order. Their local ranks come from the merged node: a
  // node's ranks sorted ascending (NodeEntry::ranks).
  std::vector<uint32_t> ranks;
  NodeIdentity node;
  // Opaque to the bootstrap: the UCX worker address of the joining daemon; the same in every
  // join of one node.
  std::string transportAddress;
  // How long this joiner waits for the others; zero means the root's default.
  std::chrono::milliseconds timeout{0};
  // The data-plane wire version the joining daemon speaks (wireVersion()).
  uint32_t wireVersion = transport::kWireVersion;
  // What every join of this key must carry alike, or the root fails them all with
  // InvalidArgument: a digest of a shrink's exclude list (each survivor's daemon joins the
  // child on its own); 0 for a communicator made by CommInit.
  uint64_t agreement = 0;
};

// The data-plane wire version this daemon states at join (transport.h kWireVersion), unless the
// test hook HC_TEST_WIRE_VERSION names another. Daemons of different versions never form a
// communicator together: the root refuses such a joiner, and a joiner such a root.
uint32_t wireVersion();

// A fresh communicator identity (transport.h, Tag::comm) from the kernel's random source, never a
// reserved one: random, so that no choice of key (another job's, read from hcctl comms) makes two
// communicators share one. The root draws one per communicator; split children get theirs from a
// member daemon.
[[nodiscard]] Result<uint64_t> drawCommIdentity();
// Peer.Join's FAILED_PRECONDITION text for two versions, naming both.
std::string wireVersionMismatch(const std::string& who, uint32_t theirs, uint32_t ours);

// Checks one join on its own (sizes, ranges, duplicates within it). The root also checks it
// against the other joins of its communicator.
[[nodiscard]] Status validateJoin(const JoinRequest& request);

struct RankPlacement {
  uint32_t node = 0;       // index into RankTable::nodes
  uint32_t localRank = 0;  // position of the rank in its node's (sorted) ranks

  bool operator==(const RankPlacement&) const = default;
};

// One per distinct NodeIdentity, however many joins brought its ranks.
struct NodeEntry {
  NodeIdentity identity;
  std::string transportAddress;
  std::vector<uint32_t> ranks;  // ascending: ranks[i] has local rank i on this node

  bool operator==(const NodeEntry&) const = default;
};

// Identical for every joiner of a communicator: nodes are ordered by their lowest rank and each
// node's ranks ascend, so the table depends neither on the order in which joins arrived nor on
// how a node split its ranks into joins.
struct RankTable {
  uint32_t nranks = 0;
  std::vector<RankPlacement> ranks;  // indexed by rank, nranks entries
  std::vector<NodeEntry> nodes;
  // The communicator's identity among its daemons (transport.h, Tag::comm), drawn by the root.
  uint64_t identity = 0;

  bool operator==(const RankTable&) const = default;
};

// Builds the table from the complete set of joins of one communicator: every rank exactly once,
// and the joins of one node (equal NodeIdentity) agreeing on transportAddress (HC_CHECK: the
// JoinRegistry refuses anything else before it gets here). Joins of one node merge into one
// NodeEntry. The communicator is named by `identity` (drawCommIdentity(), at the root).
RankTable buildRankTable(uint32_t nranks, const std::vector<const JoinRequest*>& joins,
                         uint64_t identity);

// Checks a table received from a root: every rank placed once, on a node that lists it, and an
// identity outside the reserved ones.
[[nodiscard]] Status validateRankTable(const RankTable& table);

}  // namespace hc::peer
