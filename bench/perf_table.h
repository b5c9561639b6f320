// hc-perf's output, column for column the nccl-tests table (out-of-place, then in-place), with
// hc-perf's own trailers as '#' lines so nccl-tests parsers skip them: the median latency of
// small sizes and, for allreduce, the ratio to the in-process one-pass limit.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/membw.h"
#include "bench/perf_cases.h"
#include "bench/rank_runner.h"

namespace hc::bench {

class TablePrinter {
 public:
  // Borrowed: opts and membw outlive the printer; membw may be null (not measured).
  TablePrinter(const Options& opts, const MemBwReport* membw) : opts_(opts), membw_(membw) {}

  void printPreamble(size_t caseCount) const;
  // Folds the ranks' reports of one case into a row (time = slowest rank) and prints it, with
  // the column header before the first row of each collective and the trailers after a group.
  void printRow(const Case& c, const std::vector<CaseReport>& reports);
  // "# Out of bounds values" and "# Avg bus bandwidth".
  void printFooter() const;

  int64_t wrongTotal() const { return wrongTotal_; }

 private:
  struct Row {
    size_t bytes;
    double busBw[2];
    bool hasMedian;
    double medianUs;
    double tailUs[2];  // --latency: p10 and p90
  };

  void printColumnHeader(OpKind op) const;
  void printTrailers(const Case& last) const;

  const Options& opts_;
  const MemBwReport* membw_;
  std::vector<Row> group_;  // rows of the current (op, dtype, redop) table
  int64_t wrongTotal_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
};

// nccl-tests time formatting: 2 decimals below 100 us, 1 below 10 ms, none above.
void formatTime(double us, char* out, size_t n);

}  // namespace hc::bench
