#include "daemon/observe/status_board.h"

#include <algorithm>

namespace hc::observe {

void StatusBoard::clientConnected(ClientInfo info) {
  std::lock_guard lock(mutex_);
  ++totals_.clientsAccepted;
  const uint32_t id = info.id;
  clients_[id] = std::move(info);
}

void StatusBoard::clientUpdated(uint32_t id, const std::string& name, uint64_t segmentBytes) {
  std::lock_guard lock(mutex_);
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  it->second.name = name;
  it->second.segmentBytes = segmentBytes;
}

void StatusBoard::clientCounted(uint32_t id, uint64_t submitted, uint64_t completed) {
  std::lock_guard lock(mutex_);
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  it->second.opsSubmitted = submitted;
  it->second.opsCompleted = completed;
}

void StatusBoard::clientJoined(uint32_t id, uint64_t commId) {
  std::lock_guard lock(mutex_);
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  std::vector<uint64_t>& comms = it->second.comms;
  if (std::find(comms.begin(), comms.end(), commId) == comms.end()) comms.push_back(commId);
  if (comms_.count(commId) != 0) commOwners_[commId].insert(it->second.uid);
}

void StatusBoard::clientGone(uint32_t id) {
  std::lock_guard lock(mutex_);
  clients_.erase(id);
}

std::shared_ptr<FlightRecorder> StatusBoard::commCreated(CommIdentity comm, size_t entriesPerRank) {
  auto recorder = std::make_shared<FlightRecorder>(std::move(comm), entriesPerRank);
  std::lock_guard lock(mutex_);
  ++totals_.commsCreated;
  comms_[recorder->identity().id] = recorder;
  return recorder;
}

void StatusBoard::commGone(uint64_t id) {
  std::lock_guard lock(mutex_);
  comms_.erase(id);
  commOwners_.erase(id);
  for (auto& [clientId, client] : clients_) std::erase(client.comms, id);
}

void StatusBoard::opFinished(bool ok) {
  std::lock_guard lock(mutex_);
  ok ? ++totals_.opsCompleted : ++totals_.opsFailed;
}

void StatusBoard::flightDumped() {
  std::lock_guard lock(mutex_);
  ++totals_.flightDumps;
}

std::vector<ClientInfo> StatusBoard::clients() const {
  std::lock_guard lock(mutex_);
  std::vector<ClientInfo> out;
  for (const auto& [id, client] : clients_) out.push_back(client);
  return out;
}

std::vector<std::shared_ptr<const FlightRecorder>> StatusBoard::comms() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const FlightRecorder>> out;
  for (const auto& [id, comm] : comms_) out.push_back(comm);
  return out;
}

std::shared_ptr<const FlightRecorder> StatusBoard::findComm(const std::string& idOrKey) const {
  std::lock_guard lock(mutex_);
  const bool digits = !idOrKey.empty() && idOrKey.size() <= 19 &&
                      std::all_of(idOrKey.begin(), idOrKey.end(), ::isdigit);
  if (digits) {
    auto it = comms_.find(std::stoull(idOrKey));
    if (it != comms_.end()) return it->second;
  }
  if (idOrKey.size() < 4) return nullptr;
  std::shared_ptr<const FlightRecorder> found;
  for (const auto& [id, comm] : comms_) {
    if (!comm->identity().keyHex.starts_with(idOrKey)) continue;
    if (found) return nullptr;  // ambiguous
    found = comm;
  }
  return found;
}

std::set<uid_t> StatusBoard::commOwners(uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto it = commOwners_.find(id);
  return it == commOwners_.end() ? std::set<uid_t>{} : it->second;
}

BoardTotals StatusBoard::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

}  // namespace hc::observe
