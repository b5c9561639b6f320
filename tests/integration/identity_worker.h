// hc_identity_worker: ranks of each of several communicators in one process, for the tests of
// how daemons tell communicators apart (comm_identity_test.cc, comm_identity_join_test.cc).
// hc_rank_worker holds one rank of one communicator; these tests need a process that holds ranks
// of two jobs (so that it posts them in an order the test picks), of a thousand communicators, or
// several ranks of one communicator. Inits and splits are non-blocking, posted on every
// communicator before any is waited for.
//
// Several ranks of one communicator in a process: a client names the root daemon of each init
// over its socket just before it submits the CommInit on its ring, and a daemon that reads every
// socket frame before the ring's entries must keep one naming per rank, or the first CommInit
// takes the root named for both and the second joins as if there were none, on its own daemon.
// The collectives of such ranks are posted on all of them before any is waited for, as they are
// across communicators: a blocking call per rank would wait for a rank this process has yet to
// post.
//
//   hc_identity_worker --mode collectives|split|relay|p2p
//                      (--id HEX [--id HEX ...] | --ids FILE) --nranks N
//                      (--rank R [--rank R ...] | --ranks R[,R...])
//                      [--base B] [--base-step S] [--iters K] [--counts C[,C...]]
//                      [--ops allreduce,broadcast,sendrecv] [--order forward|reverse|pairs]
//                      [--transfers SRC:DST[,SRC:DST...]] [--go-file PATH]
//                      [--init-timeout-ms T] [--watchdog SECONDS] [--expect-failure 0|1]
//                      [--end destroy|abort|hold] [--recv-again 0|1]
//
// The process holds ranks R (each once, in the order given) of communicator j for every id j, and
// posts each operation on them communicator by communicator in --order: by j, by j reversed, or
// with each pair swapped (1, 0, 3, 2, ...; two processes that post a thousand communicators in
// opposite orders would wait on each other's credits, see comm_identity_test.cc). Communicator
// j's ranks contribute multiples of its base, B + j * S (job A's ranks 1 and 2, job B's 100 and
// 200), so data delivered to the wrong communicator never passes for right. Modes
// (identity_worker_modes.cc):
//   collectives  --iters rounds of --ops; each operation is posted on every communicator and
//                every rank of it here before any is waited for; every rank's result verified
//                against all ranks' contributions.
//   split        every communicator splits into pairs (color rank / 2, keys reversed), the rounds
//                run on the children (base 10 * B + color + 1), then one more on the parents.
//   relay        the communicators one after the other: the next one's init is under way while
//                the previous one is destroyed. One rank.
//   p2p          on the one communicator, this rank's send among --transfers (if any), then its
//                receive (if any), each verified: the test orders the ranks' posts with go files.
//                One rank. --recv-again 1: the receiver then receives once more from its
//                sender (which sent once): that receive must fail, not wait.
// --go-file: every mode waits for it after init, before its first operation.
// --expect-failure 1: the first failed operation ends the run (the communicators are aborted) and
// the exit code is 0 unless data was wrong. --end: destroy (default) or abort the communicators
// at the end, or hold them until the test kills the process.
//
// Lines the tests parse (besides ERROR, WRONG, HUNG and #wrong, as worker_modes.h):
//   init ms=<n> / ready        every communicator of this process is initialized, in n ms
//   posted                     the first round's first operation is posted on every communicator
//   sent / receiving           p2p: this rank's send, or its receive, is posted
//   ending / ended / holding   --end: before and after ending the communicators, or instead
//   result status=<n> text=<t> the first failure (init or operation), or status 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hetero_comm/hc.h"

namespace hc::integ::identity {

enum class Phase { AllReduce, Broadcast, SendRecv };
enum class Order { Forward, Reverse, Pairs };

struct Options {
  std::string mode = "collectives";
  std::vector<std::string> ids;  // hex
  int nranks = 0;
  std::vector<int> ranks;  // this process's ranks of every communicator
  int64_t base = 1;
  int64_t baseStep = 1;
  uint64_t iters = 1;
  std::vector<uint64_t> counts = {7, 1, 64, 1023};  // round k uses counts[k % size]
  std::vector<Phase> ops = {Phase::AllReduce, Phase::Broadcast, Phase::SendRecv};
  Order order = Order::Forward;
  std::vector<std::pair<int, int>> transfers;  // (src, dst)
  std::string goFile;
  int initTimeoutMs = 0;  // 0: the daemon's default
  int watchdog = 60;
  bool expectFailure = false;
  bool recvAgain = false;  // p2p: the receiver receives once more from its sender, which sent once
  std::string end = "destroy";
};

// This process's rank of one communicator, with its buffers (hc_mem_alloc memory from an Arena).
struct Member {
  const hc_unique_id_t* id = nullptr;  // the communicator's, for init; null for a split child
  hc_comm_t comm = nullptr;
  int rank = 0;
  int nranks = 0;
  int64_t base = 0;
  std::string name;  // "comm 3 rank 1", for the lines it prints
  int32_t* send = nullptr;
  int32_t* recv = nullptr;
  hc_request_t reqs[2] = {nullptr, nullptr};
};

// The first failure, which ends the run; the failures it causes later add nothing.
struct Outcome {
  hc_status_t status = HC_OK;
  std::string text;
  uint64_t wrong = 0;
  bool failed() const { return status != HC_OK; }
};

// Owns hc_mem_alloc memory that holds every member's buffers, maxCount int32 elements each.
class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  [[nodiscard]] bool assign(std::vector<Member>& members, uint64_t maxCount);

 private:
  void* p_ = nullptr;
};

// ---- identity_worker.cc: the life of the communicators ----
void recordFailure(Outcome* out, hc_status_t rc, const Member& m, const std::string& what);
// The members in the order of --order, communicator by communicator: members holds ranksPerComm
// consecutive ranks of each, which keep their order.
std::vector<Member*> ordered(std::vector<Member>& members, Order order, size_t ranksPerComm);
// Starts the init of every member without waiting for it.
void startInits(const std::vector<Member*>& ms, const Options& o, Outcome* out);
// Polls every creation (init or split) under way until none is in progress. A member whose
// creation failed is aborted and left without a communicator.
void awaitCreation(const std::vector<Member*>& ms, const char* what, Outcome* out);
// Destroys every member's communicator, or aborts it when `abort` or after a failure.
void endMembers(const std::vector<Member*>& ms, bool abort, Outcome* out);
void waitForFile(const std::string& path);

// ---- identity_worker_modes.cc ----
void runRounds(const std::vector<Member*>& ms, const Options& o, uint64_t first, uint64_t n,
               bool announce, Outcome* out);
void runSplit(std::vector<Member>& parents, const Options& o, Outcome* out);
void runRelay(std::vector<Member>& members, const Options& o, Outcome* out);
void runTransfers(Member& m, const Options& o, Outcome* out);

}  // namespace hc::integ::identity
