// Engine: takes clients' submissions, forms and splits communicators, runs what each
// communicator matched (collectives in one pass, transfers as one copy), inline for small work
// and on the reduction pool for large. Communicators that span daemons (engine_net.cc) are formed
// through the Bootstrap and run as hierarchical plans whose inter-node part runs on the
// NetExecutor. Its parts are in one file each, as the sections of the private part below say:
// the local runner (engine.cc), the joiner of communicators across daemons (engine_join.cc), the
// multi-node runner (engine_net.cc, engine_pipeline.cc, engine_transfer.cc) and what operators
// see (engine_record.cc); where a transfer meets the wire is a class of its own (TransferPath).
// Runs on the IPC thread; the pool's workers reach it only through finished() + the done eventfd.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/coll/hier/node_plan.h"
#include "daemon/coll/local_plan.h"
#include "daemon/coll/reduction_pool.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/session/bootstrap.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/communicator.h"
#include "daemon/session/session.h"
#include "daemon/session/transfer_path.h"
#include "daemon/staging/device_reduce.h"
#include "daemon/staging/slice_staging.h"
#include "daemon/observe/flight_dumper.h"
#include "daemon/observe/status_board.h"

namespace hc::session {

struct EngineOptions {
  uint64_t inlineBytes = 256 << 10;  // ops moving at most this run on the IPC thread
  uint64_t pieceBytes = 1 << 20;     // work of one pool piece, per buffer
  int initTimeoutMs = 120000;
  int opTimeoutMs = 0;
  uint32_t maxInFlight = 4096;  // per session: beyond it, submissions wait in the ring
  uint64_t stagingChunkBytes = 4 << 20;  // device<->host staging copies are issued in these
  uint32_t maxRanks = 65536;              // session.max_ranks: a local join of more is refused
  bool initAcrossUids = false;            // comm.init_across_uids (Engine::join)
  uint64_t maxStagingBytes = 8ull << 30;  // session.max_staging_bytes (StagingPool's live cap)
  // What operators see (null board: no flight records, no dumps). Borrowed; outlives the engine.
  observe::StatusBoard* board = nullptr;
  metrics::DaemonMetrics* metrics = nullptr;  // borrowed; null: no metrics
  std::string stateDir;        // flight record dumps go here ("" = none)
  int lateReportMs = 0;        // comm.late_report_ms
  uint32_t flightRecordEntries = 2000;
  // Test hook (HC_TEST_JOIN_ANSWER_DELAY_MS): act on each rank table from the root this much
  // later, as when the root's answer reaches this daemon after the others'.
  std::chrono::milliseconds joinAnswerDelay{0};
};

// "0011…ff": a communicator key in logs and as the key of pending inits.
std::string commKeyHex(const uint8_t (&key)[16]);
// The key a communicator split from `parentKey` is known by on every daemon of it: the
// parent's, the split's sequence number and the color, "<parent>/<seq>.<color>".
std::string splitKeyHex(const std::string& parentKey, uint64_t seq, int color);

class Engine {
 public:
  // Borrowed: the pool (and what multiNode names) outlive the engine.
  Engine(EngineOptions options, coll::ReductionPool* pool, MultiNode multiNode = {});
  ~Engine();

  // The eventfd that becomes readable when pool jobs finished; then call collectFinished().
  int doneFd() const { return doneFd_.get(); }

  // Takes the session's submissions. Returns whether any was taken; a non-Ok status is a
  // protocol violation (a corrupt ring) and the caller closes the session.
  // At most `budget` entries per call: the caller takes turns among its sessions, so that no
  // client's flood holds the IPC thread.
  Result<bool> drain(const SessionPtr& session, uint32_t budget = UINT32_MAX);
  // Whether drain() would take the session's next submission now (back-pressure: in-flight ops,
  // open groups, completions parked for a client that has not made room).
  bool accepting(const Session& session) const;
  void collectFinished();
  // Multi-node: readable when inter-node work finished (-1 without multi-node); then call
  // collectNet(). Join answers from root daemons arrive through doneFd().
  int netDoneFd() const;
  void collectNet();

  // The client went away or aborted one handle: its ranks leave their communicators.
  void sessionClosed(const SessionPtr& session, const Status& why);
  void abortHandle(const SessionPtr& session, uint64_t handle);

  // Deadlines of joins and of late ranks (when op_timeout_ms is set).
  void checkDeadlines(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> nextDeadline() const;

  // Shutdown: fails joins and unmatched ops; running ones finish. idle() once none runs.
  void failPending(const Status& why);
  // Watches on other daemons never end on their own: they do not keep the daemon from stopping.
  bool idle() const { return running_.empty() && netOpsRunning_ == 0; }

  // Peer daemons (by Peer address) found unreachable since a communicator last formed with them:
  // the Peers health status is SERVING only while this is empty.
  const std::set<std::string>& lostPeers() const { return lostPeers_; }

 private:
  struct Joiner {
    SessionPtr session;
    uint64_t requestId;
  };
  struct PendingInit {
    int nranks;
    uid_t uid;  // the first joiner's: others join only with comm.init_across_uids
    std::chrono::steady_clock::time_point deadline;
    std::map<int, Joiner> joined;
  };
  struct Running {
    std::shared_ptr<Communicator> comm;
    Match match;
    std::unique_ptr<coll::LocalPlan> plan;
    StagedMatch staged;
  };

  // A communicator forming across daemons, as this daemon sees it: each local rank joined at
  // the root on its own; the communicator forms when every local rank has the rank table.
  struct RemoteInit {
    peer::CommKey key{};
    std::string root;
    int nranks = 0;
    std::map<int, Joiner> joined;
    std::map<int, peer::RankTable> answered;
    std::set<int> lost;  // joined, then the client went away
  };
  // A collective across daemons run as a pipeline of slices (slice_staging.h): slice `running`
  // is on the wire (NetRun::plan), slice running + 1 is staged and combined already (`next`).
  struct Pipeline {
    std::unique_ptr<staging::SliceStaging> staging;
    // Where this daemon's operands are combined before the wire; home null: on the host.
    staging::ReductionPlacement combine;
    size_t running = 0;
    std::unique_ptr<coll::hier::NodePlan> next;
  };
  // The inter-node side of a communicator that spans daemons.
  struct NetComm {
    std::shared_ptr<const coll::hier::NodeLayout> layout;
    // Names the communicator in every message among its daemons (transport.h, Tag::comm).
    uint64_t identity = 0;
    std::vector<transport::PeerAddress> nodes;
    bool notified = false;  // its failure went out to the other daemons
  };
  // Inter-node work under way: an operation, a watch on another daemon's failure notices, or
  // such a notice going out.
  struct NetRun {
    // Agree: the daemons compare the collective's descriptor before its Op runs. Verdict: after
    // the last slice of a pipelined Op, they tell each other whether their copies succeeded.
    enum class Kind { Agree, Op, Verdict, Split, Watch, Notice } kind = Kind::Op;
    std::shared_ptr<Communicator> comm;
    Match match;
    std::shared_ptr<const coll::hier::NodeLayout> layout;
    std::unique_ptr<coll::hier::NodePlan> plan;  // Op: the one running (a slice's, if pipelined)
    StagedMatch staged;                           // a transfer's staged operands
    // A transfer lent to the transport in place: the memory its buffer lies in.
    transport::MemoryKind memory = transport::MemoryKind::Host;
    // A transfer of device memory staged beside the wire on the progress thread.
    std::optional<staging::StagedTransferPlan> stagedTransfer;
    std::unique_ptr<Pipeline> pipeline;           // a collective run in slices
    uint32_t node = 0;  // Watch, Notice: the other daemon
    std::vector<uint8_t> notice;
    // Op, Split: its requests were completed with the communicator's failure while the transport
    // still held its buffers (kept alive here until the job is final).
    bool released = false;
  };
  struct JoinAnswer {
    std::string key;
    int rank;
    Result<peer::RankTable> table;
    std::chrono::steady_clock::time_point readyAt;  // joinAnswerDelay after it came
  };

  // engine.cc: the local runner (submissions, units, matching, one-pass plans, local splits).
  void accept(const SessionPtr& session, const ipc::SubmitEntry& e);
  void join(const SessionPtr& session, const ipc::SubmitEntry& e);
  void failInit(const std::string& key, const Status& why);
  void progress(const std::shared_ptr<Communicator>& comm);
  void run(const std::shared_ptr<Communicator>& comm, Match match);
  void split(const std::shared_ptr<Communicator>& comm, const Match& match);
  void finish(uint64_t runId);
  void dropIfEmpty(const std::shared_ptr<Communicator>& comm);
  std::vector<coll::RankBuffers> matchBuffers(const Match& match) const;

  // engine_record.cc: what operators see.
  // Gives a new communicator (its members set) its flight recorder on the board, under the key
  // every daemon of it knows it by, and the incident handler (log, dump).
  // nodeAddresses and ranksOfNode as in CommIdentity (empty on one daemon).
  void observe(const std::shared_ptr<Communicator>& comm, std::string keyHex,
               std::vector<std::string> nodeAddresses = {},
               std::vector<std::vector<int>> ranksOfNode = {});
  void onIncident(const Communicator& comm, const std::string& reason, const std::string& detail);
  // Metrics: a match whose device operands go through host staging; a daemon of `comm` lost.
  void countStaging(const Match& match, const char* reason);
  void peerLost(const Communicator& comm, uint32_t node);

  // engine_join.cc: communicators that span daemons, joined at their root (and netDoneFd).
  void joinRemote(const SessionPtr& session, const ipc::SubmitEntry& e, std::string root);
  void takeJoinAnswers();
  void onJoinAnswer(JoinAnswer answer);
  void failRemoteInit(const std::string& key, const Status& why);
  void formAcrossNodes(const std::string& key, const peer::RankTable& table);
  // A communicator laid out as `layout`: remote ranks marked, and when it spans daemons its
  // inter-node side (identity, the daemons' addresses) with a watch on every other daemon. An
  // error when the identity is refused here (CommIdentities::claim).
  Result<std::shared_ptr<Communicator>> makeSpanningComm(
      coll::hier::NodeLayout layout, uint64_t identity, std::vector<transport::PeerAddress> nodes);

  // engine_net.cc: the multi-node runner (NetOps, agreement, splits, watches, notices, drains).
  void runAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net, Match match);
  void splitAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                        const Match& match);
  void finishSplitAcrossNodes(NetRun& run);
  // Hands the job to the NetExecutor; the run waits in netRuns_ (the reference stays valid until
  // collectNet takes its result).
  NetRun& submitNet(NetRun run, coll::net::NetJob job);
  // The run's op ends with `status`: its ranks hear it now, and the communicator moves on.
  void endNetRun(NetRun& run, const Status& status);
  void startNetOp(const NetComm& net, NetRun run);
  // Agree and Verdict: every daemon of the communicator contributes `bytes` (this one `mine`) and
  // all of them land in run.notice, in node order.
  void exchange(const NetComm& net, NetRun run, const void* mine, size_t bytes);
  void onAgreement(NetRun run);
  void watchNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net);
  void onWatch(NetRun& run, const Status& status);
  void propagateFailures();
  void releaseRuns(const std::shared_ptr<Communicator>& comm);
  void notifyNodes(const std::shared_ptr<Communicator>& comm, NetComm& net);
  // Sends every other daemon of the communicator its notice (notices.h).
  void sendNotices(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                   const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor);
  void retireNet(const std::shared_ptr<Communicator>& comm);

  // engine_transfer.cc: a send or receive whose other half runs on another daemon; where its
  // buffer meets the wire is transfers_' choice (transfer_path.h).
  void transferAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                           Match match);

  // engine_pipeline.cc: a collective across daemons run in slices.
  void startPipeline(const NetComm& net, NetRun run, uint64_t sliceBytes);
  Result<std::unique_ptr<coll::hier::NodePlan>> planSlice(NetRun& run, size_t k);
  NetRun& submitSlice(const NetComm& net, NetRun run);
  void prepareNextSlice(NetRun& run);
  void onSliceDone(NetRun run, const Status& status);
  void startVerdict(const NetComm& net, NetRun run);
  void onVerdict(NetRun run, const Status& status);

  EngineOptions options_;
  coll::ReductionPool* pool_;
  UniqueFd doneFd_;
  std::map<std::string, PendingInit> inits_;
  std::map<uint64_t, std::shared_ptr<Communicator>> comms_;
  std::map<uint64_t, Running> running_;
  uint64_t nextCommId_ = 1;
  uint64_t nextRunId_ = 1;
  staging::StagingPool staging_;
  staging::DeviceCopier copier_;
  std::mutex finishedMutex_;
  std::vector<uint64_t> finished_;  // run ids, filled by pool workers
  std::vector<JoinAnswer> joinAnswers_;  // filled by the bootstrap's threads (finishedMutex_)
  std::vector<JoinAnswer> delayedAnswers_;  // joinAnswerDelay: taken, not acted on yet

  MultiNode multiNode_;
  std::map<std::string, RemoteInit> remoteInits_;
  std::map<uint64_t, NetComm> netComms_;  // by communicator id
  std::map<uint64_t, NetRun> netRuns_;    // by job id
  size_t netOpsRunning_ = 0;              // netRuns_ of Kind::Agree, Op, Verdict, Split
  coll::hier::ScratchPool scratch_;
  std::set<std::string> lostPeers_;
  // Where transfers between daemons meet the wire; owns the progress thread's copy lanes for
  // staged transfers (destroyed after the executor stopped, as before).
  TransferPath transfers_;
  // Writes flight-record dumps off the IPC thread, rate-limited; made at the first incident.
  std::unique_ptr<observe::FlightDumper> dumper_;
};

}  // namespace hc::session
