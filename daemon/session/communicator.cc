#include "daemon/session/communicator.h"

#include <spdlog/spdlog.h>

#include "daemon/session/session.h"
#include "daemon/session/validate.h"

namespace hc::session {

Communicator::Communicator(uint64_t id, int nranks, int opTimeoutMs)
    : id_(id), members_(nranks, nullptr), queues_(nranks), opTimeoutMs_(opTimeoutMs) {}

bool Communicator::hasMembers() const {
  for (auto* m : members_) {
    if (m != nullptr) return true;
  }
  return false;
}

void Communicator::post(int rank, PendingOp op) {
  if (failed()) {
    op.session->complete(op.requestId, failure_);
    return;
  }
  queues_[rank].push_back(std::move(op));
}

Status Communicator::agreement(const std::vector<PendingOp>& heads) const {
  const PendingOp& a = heads[0];
  for (size_t r = 1; r < heads.size(); ++r) {
    const PendingOp& b = heads[r];
    if (a.type != b.type || a.dtype != b.dtype || a.count != b.count || a.root != b.root ||
        a.redop != b.redop) {
      return invalidArgument("op " + std::to_string(seq_) + " mismatch: rank 0 posted " +
                             describeOp(a) + ", rank " + std::to_string(r) + " posted " +
                             describeOp(b));
    }
  }
  return okStatus();
}

std::optional<std::vector<PendingOp>> Communicator::takeReady() {
  if (running_ || failed()) return std::nullopt;
  for (const auto& q : queues_) {
    if (q.empty()) return std::nullopt;
  }
  std::vector<PendingOp> heads;
  heads.reserve(queues_.size());
  for (auto& q : queues_) heads.push_back(q.front());
  Status s = agreement(heads);
  if (!s.isOk()) {
    spdlog::warn("communicator {:x}: {}", id_, s.message());
    fail(s);
    return std::nullopt;
  }
  for (auto& q : queues_) q.pop_front();
  running_ = true;
  return heads;
}

void Communicator::finishRunning(std::vector<PendingOp>& heads, const Status& status) {
  running_ = false;
  ++seq_;
  for (auto& op : heads) op.session->complete(op.requestId, status);
  heads.clear();
}

void Communicator::leave(int rank, const Status& why) {
  members_[rank] = nullptr;
  for (auto& op : queues_[rank]) op.session->complete(op.requestId, why);
  queues_[rank].clear();
  if (hasMembers()) fail(why);
}

void Communicator::fail(const Status& why) {
  if (failure_.isOk()) failure_ = why;
  for (auto& q : queues_) {
    for (auto& op : q) op.session->complete(op.requestId, failure_);
    q.clear();
  }
}

std::string Communicator::missingRanks() const {
  std::string s;
  for (size_t r = 0; r < queues_.size(); ++r) {
    if (!queues_[r].empty()) continue;
    s += (s.empty() ? "" : ", ") + std::to_string(r);
  }
  return s;
}

std::optional<std::chrono::steady_clock::time_point> Communicator::deadline() const {
  if (opTimeoutMs_ <= 0 || running_ || failed()) return std::nullopt;
  std::optional<std::chrono::steady_clock::time_point> first;
  for (const auto& q : queues_) {
    if (!q.empty() && (!first || q.front().postedAt < *first)) first = q.front().postedAt;
  }
  if (!first) return std::nullopt;
  return *first + std::chrono::milliseconds(opTimeoutMs_);
}

void Communicator::checkDeadline(std::chrono::steady_clock::time_point now) {
  auto d = deadline();
  if (!d || now < *d) return;
  fail(Status{Code::Timeout, "op " + std::to_string(seq_) + ": ranks " + missingRanks() +
                                 " did not post within " + std::to_string(opTimeoutMs_) + " ms"});
}

}  // namespace hc::session
