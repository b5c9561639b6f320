#include "daemon/peer/peer_types.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <unordered_set>

#include "daemon/transport/transport.h"

namespace hc::peer {

std::string commKeyHex(const CommKey& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(key.size() * 2);
  for (uint8_t b : key) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
  }
  return hex;
}

std::string NodeIdentity::toString() const { return hostname + "/" + bootId + "/" + instance; }

Result<NodeIdentity> localNodeIdentity(std::string instance) {
  NodeIdentity id;
  id.instance = std::move(instance);
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) id.hostname = host;
  std::ifstream bootIdFile("/proc/sys/kernel/random/boot_id");
  std::getline(bootIdFile, id.bootId);
  if (id.hostname.empty() && id.bootId.empty()) {
    return systemError("read the hostname and /proc/sys/kernel/random/boot_id", errno);
  }
  if (id.hostname.empty()) id.hostname = "unknown-host";
  return id;
}

namespace {

Status validateIdentity(const NodeIdentity& node) {
  if (node.hostname.empty()) return invalidArgument("the join names no node (empty hostname)");
  for (const std::string* field : {&node.hostname, &node.bootId, &node.instance}) {
    if (field->size() > kMaxIdentityFieldBytes) {
      return invalidArgument("node identity field longer than " +
                             std::to_string(kMaxIdentityFieldBytes) + " bytes");
    }
  }
  return okStatus();
}

}  // namespace

Status validateJoin(const JoinRequest& request) {
  if (request.nranks == 0 || request.nranks > kMaxRanks) {
    return invalidArgument("nranks " + std::to_string(request.nranks) + " is out of range [1, " +
                           std::to_string(kMaxRanks) + "]");
  }
  if (request.ranks.empty()) return invalidArgument("the join brings no ranks");
  if (request.ranks.size() > request.nranks) {
    return invalidArgument("the join brings " + std::to_string(request.ranks.size()) +
                           " ranks to a communicator of " + std::to_string(request.nranks));
  }
  std::unordered_set<uint32_t> seen;
  for (uint32_t rank : request.ranks) {
    if (rank >= request.nranks) {
      return invalidArgument("rank " + std::to_string(rank) + " is out of range for nranks " +
                             std::to_string(request.nranks));
    }
    if (!seen.insert(rank).second) {
      return invalidArgument("rank " + std::to_string(rank) + " appears twice in one join");
    }
  }
  HC_RETURN_IF_ERROR(validateIdentity(request.node));
  if (request.transportAddress.empty()) return invalidArgument("empty transport address");
  if (request.transportAddress.size() > kMaxTransportAddressBytes) {
    return invalidArgument("transport address longer than " +
                           std::to_string(kMaxTransportAddressBytes) + " bytes");
  }
  if (request.timeout.count() < 0 || request.timeout.count() > UINT32_MAX) {
    return invalidArgument("join timeout " + std::to_string(request.timeout.count()) +
                           " ms is out of range");
  }
  return okStatus();
}

RankTable buildRankTable(uint32_t nranks, const std::vector<const JoinRequest*>& joins,
                         uint64_t identity) {
  // Joins of one node merge into one entry, whatever order they came in and however the node
  // split its ranks among them.
  std::map<NodeIdentity, NodeEntry> merged;
  for (const JoinRequest* join : joins) {
    auto [it, opened] = merged.try_emplace(join->node);
    NodeEntry& node = it->second;
    if (opened) {
      node.identity = join->node;
      node.transportAddress = join->transportAddress;
    }
    HC_CHECK(node.transportAddress == join->transportAddress);
    node.ranks.insert(node.ranks.end(), join->ranks.begin(), join->ranks.end());
  }

  RankTable table;
  table.nranks = nranks;
  table.identity = identity;
  table.ranks.resize(nranks);
  table.nodes.reserve(merged.size());
  for (auto& [identity, node] : merged) {
    std::sort(node.ranks.begin(), node.ranks.end());
    table.nodes.push_back(std::move(node));
  }
  // Every join brings a rank (validateJoin), so every node has a lowest one; ranks are unique.
  std::sort(table.nodes.begin(), table.nodes.end(), [](const NodeEntry& a, const NodeEntry& b) {
    return a.ranks.front() < b.ranks.front();
  });
  for (size_t n = 0; n < table.nodes.size(); ++n) {
    const std::vector<uint32_t>& ranks = table.nodes[n].ranks;
    for (size_t local = 0; local < ranks.size(); ++local) {
      table.ranks[ranks[local]] = {static_cast<uint32_t>(n), static_cast<uint32_t>(local)};
    }
  }
  return table;
}

uint32_t wireVersion() {
  static const uint32_t version = [] {
    const char* hook = std::getenv("HC_TEST_WIRE_VERSION");
    if (hook == nullptr || *hook == '\0') return transport::kWireVersion;
    return static_cast<uint32_t>(std::strtoul(hook, nullptr, 10));
  }();
  return version;
}

Result<uint64_t> drawCommIdentity() {
  while (true) {
    uint64_t identity = 0;
    const ssize_t n = ::getrandom(&identity, sizeof(identity), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(identity))) {
      return systemError("communicator identity: getrandom", n < 0 ? errno : EIO);
    }
    if (identity >= transport::kFirstCommIdentity) return identity;
  }
}

std::string wireVersionMismatch(const std::string& who, uint32_t theirs, uint32_t ours) {
  return who + " speaks wire version " + std::to_string(theirs) + ", this daemon wire version " +
         std::to_string(ours) +
         ": daemons of different versions cannot form a communicator (upgrade every daemon of "
         "the job to one version)";
}

Status validateRankTable(const RankTable& table) {
  if (table.identity < transport::kFirstCommIdentity) {
    return invalidArgument("rank table names the communicator by reserved identity " +
                           std::to_string(table.identity));
  }
  if (table.nranks == 0 || table.ranks.size() != table.nranks) {
    return invalidArgument("rank table has " + std::to_string(table.ranks.size()) +
                           " placements for nranks " + std::to_string(table.nranks));
  }
  std::vector<bool> placed(table.nranks, false);
  for (size_t n = 0; n < table.nodes.size(); ++n) {
    const NodeEntry& node = table.nodes[n];
    for (size_t local = 0; local < node.ranks.size(); ++local) {
      uint32_t rank = node.ranks[local];
      if (rank >= table.nranks || placed[rank]) {
        return invalidArgument("rank table places rank " + std::to_string(rank) +
                               " twice or out of range");
      }
      placed[rank] = true;
      const RankPlacement& p = table.ranks[rank];
      if (p.node != n || p.localRank != local) {
        return invalidArgument("rank table disagrees with itself about rank " +
                               std::to_string(rank));
      }
    }
  }
  auto missing = std::find(placed.begin(), placed.end(), false);
  if (missing != placed.end()) {
    return invalidArgument("rank table leaves rank " + std::to_string(missing - placed.begin()) +
                           " without a node");
  }
  return okStatus();
}

}  // namespace hc::peer
