// Communicator: the local ranks of one communicator and the operations each has posted.
// Op k runs when every rank has posted its k-th operation and the k-th descriptors agree; ops run
// one at a time, in order, like a stream. Runs on the IPC thread only.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/session/pending_op.h"

namespace hc::session {

class Communicator {
 public:
  Communicator(uint64_t id, int nranks, int opTimeoutMs);

  uint64_t id() const { return id_; }
  int nranks() const { return static_cast<int>(members_.size()); }
  uint64_t seq() const { return seq_; }

  // Borrowed: the session outlives its membership (Engine::sessionClosed calls leave()).
  void setMember(int rank, Session* session) { members_[rank] = session; }
  bool hasMembers() const;

  // Queues a rank's op, or completes it at once with the error that failed the communicator.
  void post(int rank, PendingOp op);
  // The heads of every queue, in rank order, when all ranks posted op k and none is running.
  // A disagreement fails the communicator on every rank with the same message.
  std::optional<std::vector<PendingOp>> takeReady();
  // The running op finished: completes every rank's request with status.
  void finishRunning(std::vector<PendingOp>& heads, const Status& status);
  bool running() const { return running_; }

  // A rank left (destroyed, aborted or its client died). Other ranks' pending and later ops fail
  // with why, since op k can no longer be matched.
  void leave(int rank, const Status& why);
  // Fails every queued op now and every op posted later.
  void fail(const Status& why);
  bool failed() const { return !failure_.isOk(); }

  // When the head op has waited longer than the op timeout, fails the communicator with Timeout
  // naming the ranks that have not posted.
  void checkDeadline(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> deadline() const;

 private:
  Status agreement(const std::vector<PendingOp>& heads) const;
  std::string missingRanks() const;

  uint64_t id_;
  std::vector<Session*> members_;
  std::vector<std::deque<PendingOp>> queues_;
  uint64_t seq_ = 0;  // index of the op at the heads of the queues
  bool running_ = false;
  Status failure_;
  int opTimeoutMs_;
};

}  // namespace hc::session
