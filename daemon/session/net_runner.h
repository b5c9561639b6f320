// NetRunner: the multi-node runner. Runs the operations of communicators whose ranks live on
// several daemons as NodePlans (the local step here, the inter-node step as NetOps on the
// NetExecutor's progress thread): descriptor agreement among the daemons, collectives whole or
// in slices (net_pipeline.cc), transfers whose other half is on another daemon
// (net_transfer.cc), splits across daemons (net_split.cc), and the watches, failure notices and
// goodbyes among the daemons of each communicator (net_runner.cc says how failures cross).
// It owns each spanning communicator's inter-node side; the communicator itself lives in the
// context's table. Runs on the IPC thread; the progress thread reaches it only through the
// executor's results (doneFd(), collect()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/status.h"
#include "daemon/coll/hier/node_plan.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_context.h"
#include "daemon/session/transfer_path.h"
#include "daemon/staging/device_reduce.h"
#include "daemon/staging/slice_staging.h"

namespace hc::session {

class NetRunner {
 public:
  // Borrowed: the context (and the executor its MultiNode names) outlive this object.
  explicit NetRunner(EngineContext* context);
  NetRunner(const NetRunner&) = delete;
  NetRunner& operator=(const NetRunner&) = delete;

  // Whether the communicator has ranks on other daemons (an inter-node side here).
  bool spans(uint64_t commId) const { return netComms_.count(commId) != 0; }
  // The identity that names it among its daemons; 0 when it runs on this daemon only.
  uint64_t identityOf(uint64_t commId) const;
  // Where its ranks live; null when it runs on this daemon only.
  std::shared_ptr<const coll::hier::NodeLayout> layoutOf(uint64_t commId) const;

  // A communicator laid out as `layout`, in the context's table: remote ranks marked, and when
  // it spans daemons its inter-node side (identity, the daemons' addresses) with a watch on
  // every other daemon. An error when the identity is refused here (CommIdentities::claim).
  [[nodiscard]] Result<std::shared_ptr<Communicator>> formSpanning(
      coll::hier::NodeLayout layout, uint64_t identity, std::vector<transport::PeerAddress> nodes);

  // A match of a spanning communicator (spans()) that involves other daemons: a collective,
  // or a transfer whose other half is on another daemon. Ends later, in collect(), unless it
  // fails before anything went out.
  void run(const std::shared_ptr<Communicator>& comm, Match match);
  // A CommSplit of a spanning communicator: every daemon learns every rank's color and key, and
  // makes the same children. Ends in collect().
  void split(const std::shared_ptr<Communicator>& comm, const Match& match);

  // Readable when inter-node work finished (-1 without multi-node); then call collect().
  int doneFd() const;
  void collect();
  // Inter-node operations under way (watches and notices never end on their own: not counted).
  bool idle() const { return netOpsRunning_ == 0; }

  // The communicator failed here: once, stop its inter-node work and tell its other daemons.
  void notifyIfFailed(const std::shared_ptr<Communicator>& comm);
  // notifyIfFailed() for every spanning communicator in the context's table.
  void propagateFailures();
  // Its last local rank left: a goodbye (or its failure) goes to the other daemons, and its
  // identity's later messages are dropped here.
  void retire(const std::shared_ptr<Communicator>& comm);

 private:
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

  // net_runner.cc: operations, agreement, watches, notices, goodbyes.
  void runCollective(const std::shared_ptr<Communicator>& comm, const NetComm& net, Match match);
  // Hands the job to the NetExecutor; the run waits in netRuns_ (the reference stays valid until
  // collect takes its result).
  NetRun& submitNet(NetRun run, coll::net::NetJob job);
  // The run's op ends with `status`: its ranks hear it now, and the communicator moves on.
  void endNetRun(NetRun& run, const Status& status);
  // An op that failed here before its NetOp went out: its ranks hear `why`, and the communicator
  // fails with it, so the daemons that started their side hear it from the notice.
  void failBeforeWire(const std::shared_ptr<Communicator>& comm, const Match& match,
                      const Status& why);
  void startNetOp(const NetComm& net, NetRun run);
  // Agree and Verdict: every daemon of the communicator contributes `bytes` (this one `mine`) and
  // all of them land in run.notice, in node order.
  void exchange(const NetComm& net, NetRun run, const void* mine, size_t bytes);
  void onAgreement(NetRun run);
  void watchNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net);
  void onWatch(NetRun& run, const Status& status);
  void releaseRuns(const std::shared_ptr<Communicator>& comm);
  void notifyNodes(const std::shared_ptr<Communicator>& comm, NetComm& net);
  // Sends every other daemon of the communicator its notice (notices.h).
  void sendNotices(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                   const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor);
  // One run of `kind` (Watch: a posted receive; Notice: a send) with every other daemon of the
  // communicator, its buffer noticeFor(node).
  void noticeRuns(const std::shared_ptr<Communicator>& comm, const NetComm& net, NetRun::Kind kind,
                  const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor);

  // net_split.cc: the children of a split across daemons, made alike on every daemon.
  void finishSplit(NetRun& run);

  // net_transfer.cc: a send or receive whose other half runs on another daemon; where its
  // buffer meets the wire is transfers_' choice (transfer_path.h).
  void runTransfer(const std::shared_ptr<Communicator>& comm, const NetComm& net, Match match);

  // net_pipeline.cc: a collective across daemons run in slices.
  void startPipeline(const NetComm& net, NetRun run, uint64_t sliceBytes);
  Result<std::unique_ptr<coll::hier::NodePlan>> planSlice(NetRun& run, size_t k);
  NetRun& submitSlice(const NetComm& net, NetRun run);
  void prepareNextSlice(NetRun& run);
  void onSliceDone(NetRun run, const Status& status);
  void startVerdict(const NetComm& net, NetRun run);
  void onVerdict(NetRun run, const Status& status);

  EngineContext& context_;
  MultiNode& multiNode_;  // the context's
  std::map<uint64_t, NetComm> netComms_;  // by communicator id
  std::map<uint64_t, NetRun> netRuns_;    // by job id
  size_t netOpsRunning_ = 0;              // netRuns_ of Kind::Agree, Op, Verdict, Split
  coll::hier::ScratchPool scratch_;
  // Where transfers between daemons meet the wire; owns the progress thread's copy lanes for
  // staged transfers (the executor stops before the engine and its parts go).
  TransferPath transfers_;
};

}  // namespace hc::session
