// One rank of hc-perf, run in a forked child: joins the communicator (through hc_* or, with
// --api nccl, the shim's NCCL API), allocates its buffers once, walks the case list and reports
// each case to the parent over its pipe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "bench/perf_cases.h"
#include "bench/perf_options.h"

namespace hc::bench {

constexpr uint32_t kInitCase = UINT32_MAX;      // caseIndex of a failure before the first case
constexpr size_t kLatencyMaxBytes = 64 * 1024;  // cases up to this size also get a median latency

// One report per case and rank; fixed size and below PIPE_BUF, so one write() is one report.
struct CaseReport {
  uint32_t caseIndex;
  int32_t rank;
  int32_t status;     // hc_status_t: HC_OK when the case ran
  int32_t hasMedian;  // medianUs is set (size <= kLatencyMaxBytes, or any size with --latency)
  double timeUs[2];   // average per operation: out-of-place, in-place (< 0: not run)
  int64_t wrong[2];   // wrong elements of the checked runs; -1 when not checked (-c 0)
  double medianUs;    // median of blocking post + wait, out-of-place
  double tailUs[2];   // --latency: the 10th and 90th percentiles beside the median
  // CPU seconds the daemon spent over each timed batch (out-of-place, in-place), read by rank 0
  // around its timed loop; < 0 when not read (no daemon pid, another rank, or not run).
  double daemonCpuSec[2];
  char message[416];  // when status != HC_OK: hc_get_error_string + hc_get_last_error
};
static_assert(sizeof(CaseReport) <= 512);

// What a rank shares with the parent besides the case list.
struct RankLink {
  int reportFd = -1;  // the rank writes one CaseReport per case here
  // Before a case with measuredBound, the rank reads one byte here: the parent has measured the
  // memory bandwidth and the CPUs are the ranks' again.
  int gateFd = -1;
  pid_t parent = -1;
  pid_t daemonPid = -1;  // the daemon whose CPU time rank 0 reads; -1: none
};

// Runs rank `rank` and returns the child's exit code. Never returns to the caller's other work:
// the child must _exit() with the result.
int runRank(const Options& opts, const std::vector<Case>& cases, const hc_unique_id_t& id, int rank,
            const RankLink& link);

}  // namespace hc::bench
