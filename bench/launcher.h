// Forks hc-perf's rank processes and collects their reports. Each rank holds only the write end
// of its own pipe, so the parent reads EOF exactly when that rank dies; a rank that fails, dies
// or stalls past the timeout ends the run, and every other rank is killed and reaped.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "bench/perf_cases.h"
#include "bench/rank_runner.h"

namespace hc::bench {

class RankSet {
 public:
  RankSet() = default;
  RankSet(const RankSet&) = delete;
  RankSet& operator=(const RankSet&) = delete;
  ~RankSet();  // kills and reaps ranks still running

  // Forks opts.nranks ranks; with several daemons (opts.sockets) each rank's HC_SOCKET names the
  // daemon that hosts it. Rank 0 reads daemonPid's CPU time around its timed batches (-1: none).
  // Call with no other threads running and stdio flushed.
  bool start(const Options& opts, const std::vector<Case>& cases, const hc_unique_id_t& id,
             pid_t daemonPid, std::string* error);

  // Lets every rank start the next case marked measuredBound; they wait until then.
  bool openGate(std::string* error);

  // Reads every rank's report of case caseIndex into out (indexed by rank). False, with *error
  // saying which rank and why, when a rank reported a failure, died, or stalled past -T.
  bool collect(uint32_t caseIndex, std::vector<CaseReport>* out, std::string* error);

  // Waits for every rank to exit. False when one failed (its report, if any, is in *error).
  bool finish(std::string* error);

  void killAll();

 private:
  struct Rank {
    pid_t pid = -1;
    int fd = -1;  // read end of the rank's report pipe
    bool reaped = false;
    int status = 0;
  };

  // Reads one report from rank r; false on EOF (the rank is then reaped and described).
  bool readReport(int r, CaseReport* out, std::string* error);
  std::string describeExit(int r);

  std::vector<Rank> ranks_;
  int timeoutMs_ = -1;
  int gateRead_ = -1;  // the ranks' end of the gate; closed here once they are forked
  int gateWrite_ = -1;
};

}  // namespace hc::bench
