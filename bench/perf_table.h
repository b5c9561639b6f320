// hc-perf's output, column for column the nccl-tests table (out-of-place, then in-place), with
// hc-perf's own trailers as '#' lines so nccl-tests parsers skip them: the median latency of
// small sizes; for rows from 1 MiB (and each table's last) the daemon's CPU-seconds per GB beside
// the bus bandwidth; and, for rows of at least 4x the last-level cache, the memory-bound floor
// (bound_model.h) with hc-perf's fraction of it, a row above 100% flagged as a measurement error.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bound_model.h"
#include "bench/perf_cases.h"
#include "bench/rank_runner.h"
#include "bench/stream_bench.h"

namespace hc::bench {

// What the trailers need to know about the run.
struct BoundSetup {
  bool bounds = false;        // large rows get a bound (single daemon, host buffers, -m 1)
  std::string noBoundReason;  // when !bounds, for the preamble
  LastLevelCache llc;
  size_t streamBytes = 0;  // the buffer the rates are measured over
  pid_t daemonPid = -1;    // whose CPU time rank 0 reads; -1: none (several daemons, not found)
  std::string noCpuReason;
};

// The bandwidth measured right before and right after one bounded row.
struct RowRates {
  StreamMeasurement before;
  StreamMeasurement after;
};

class TablePrinter {
 public:
  // Borrowed: opts and setup outlive the printer.
  TablePrinter(const Options& opts, const BoundSetup& setup) : opts_(opts), setup_(setup) {}

  void printPreamble(size_t caseCount) const;
  // Folds the ranks' reports of one case into a row (time = slowest rank) and prints it, with
  // the column header before the first row of each collective and the trailers after a group.
  // rates: measured around a case with measuredBound, else null.
  void printRow(const Case& c, const std::vector<CaseReport>& reports, const RowRates* rates);
  // "# Out of bounds values", "# Avg bus bandwidth", and the rows above their bound, if any.
  void printFooter() const;

  int64_t wrongTotal() const { return wrongTotal_; }
  int aboveBound() const { return aboveBound_; }

 private:
  struct Row {
    Case c;
    double timeUs[2];  // < 0: side not run
    double busBw[2];
    double cpuSec[2];  // the daemon's, over the timed batch; < 0: unknown
    bool hasMedian;
    double medianUs;
    double tailUs[2];  // --latency: p10 and p90
    bool bounded;
    RowRates rates;
  };

  void printColumnHeader(OpKind op) const;
  void printTrailers();
  // One side of a row from 1 MiB: busbw, the daemon's CPU-s/GB and, when bounded, the bound.
  void printSide(const Row& row, int side);

  const Options& opts_;
  const BoundSetup& setup_;
  std::vector<Row> group_;  // rows of the current (op, dtype, redop) table
  int aboveBound_ = 0;      // rows whose time was under their bound: measurement errors
  int64_t wrongTotal_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
};

// nccl-tests time formatting: 2 decimals below 100 us, 1 below 10 ms, none above.
void formatTime(double us, char* out, size_t n);

}  // namespace hc::bench
