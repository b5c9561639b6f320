// CommJoiner: forms communicators. A CommInit joins the other ranks of its key on this daemon,
// or, when the client named a root daemon (its unique id came from another node), joins at that
// root through the Bootstrap; the communicator forms once every rank (here: every local rank)
// has joined or has the root's rank table, and spans the daemons that table names (NetRunner
// runs its operations). Splits among ranks all on this daemon form their children here too.
// Runs on the IPC thread; the root's answers arrive on the bootstrap's threads, which reach it
// only through the context's wake() and takeJoinAnswers().
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_context.h"
#include "daemon/session/net_runner.h"
#include "daemon/session/session.h"

namespace hc::session {

class CommJoiner {
 public:
  using Clock = std::chrono::steady_clock;

  // Borrowed: the context and the net runner (which gives spanning communicators their
  // inter-node side) outlive this object.
  CommJoiner(EngineContext* context, NetRunner* net) : context_(*context), net_(*net) {}
  CommJoiner(const CommJoiner&) = delete;
  CommJoiner& operator=(const CommJoiner&) = delete;

  // A rank's CommInit (entry `e` of the session's ring). Its request completes when the
  // communicator formed (with the rank's handle) or the join failed.
  void join(const SessionPtr& session, const ipc::SubmitEntry& e);
  // A CommSplit matched among ranks that are all on this daemon: the children form, and the
  // match finishes.
  void splitLocally(const std::shared_ptr<Communicator>& comm, const Match& match);

  // One rank's join of communicator `key` (nranks ranks, rank `rank`) at the root daemon `root`
  // ("host:port"), as a CommInit naming that root makes it; its request completes with the
  // handle once the communicator formed. `agreement`: what every join of the key must carry
  // alike (the root fails them all when one differs; a shrink's exclude list), 0 for none.
  // `timeoutHint` goes before a Timeout's words (what else may have kept the others away; first,
  // since a completion carries only the start of a long text).
  void joinAt(const SessionPtr& session, uint64_t requestId, const peer::CommKey& key, int nranks,
              int rank, int timeoutMs, std::string root, uint64_t agreement,
              std::string timeoutHint = {});

  // Acts on the root daemons' answers that came (once joinAnswerDelay passed for each).
  void takeJoinAnswers();
  // takeJoinAnswers(), when answers wait for their delay.
  void takeDelayedAnswers();

  // The client went away: joins here with its ranks fail; its joins at a root cannot be
  // withdrawn, so its ranks leave the communicator once it formed.
  void sessionClosed(const SessionPtr& session);
  // Joins here whose deadline passed fail, naming the ranks that did not join.
  void failLateJoins(Clock::time_point now);
  // Shutdown: every join under way fails with `why`.
  void failAll(const Status& why);
  // The earliest join deadline, or delayed answer due.
  std::optional<Clock::time_point> nextDeadline() const;

 private:
  struct JoinedRank {
    SessionPtr session;
    uint64_t requestId;
    Bootstrap::JoinId join = 0;  // its join at the root, for a communicator across daemons
    bool smallOps = false;       // asked for the small-operation area (kEntrySmallOps)
  };
  // A communicator forming among this daemon's ranks.
  struct PendingInit {
    int nranks;
    uid_t uid;  // the first joiner's: others join only with comm.init_across_uids
    Clock::time_point deadline;
    std::map<int, JoinedRank> joined;
  };
  // A communicator forming across daemons, as this daemon sees it: each local rank joined at
  // the root on its own; the communicator forms when every local rank has the rank table.
  struct RemoteInit {
    peer::CommKey key{};
    std::string root;
    int nranks = 0;
    std::string timeoutHint;  // joinAt's
    std::map<int, JoinedRank> joined;
    std::map<int, peer::RankTable> answered;
    std::set<int> lost;  // joined, then the client went away: its join is being withdrawn
  };
  struct JoinAnswer {
    std::string key;
    int rank;
    Result<peer::RankTable> table;
    Clock::time_point readyAt;  // joinAnswerDelay after it came
  };

  void failInit(const std::string& key, const Status& why);
  // Gives comm a small-operation area when its ranks share one uid and it has 2 to
  // kAreaMaxRanks of them (every rank asked for it).
  void offerSmallArea(Communicator& comm, const std::map<int, JoinedRank>& joined);
  void joinRemote(const SessionPtr& session, const ipc::SubmitEntry& e, std::string root);
  void onJoinAnswer(JoinAnswer answer);
  void failRemoteInit(const std::string& key, const Status& why);
  void formAcrossNodes(const std::string& key, const peer::RankTable& table);

  EngineContext& context_;
  NetRunner& net_;
  std::map<std::string, PendingInit> inits_;
  std::map<std::string, RemoteInit> remoteInits_;
  std::mutex answersMutex_;
  std::vector<JoinAnswer> joinAnswers_;     // filled by the bootstrap's threads (answersMutex_)
  std::vector<JoinAnswer> delayedAnswers_;  // joinAnswerDelay: taken, not acted on yet
};

}  // namespace hc::session
