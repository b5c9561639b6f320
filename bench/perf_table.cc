#include "bench/perf_table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/perf_api_nccl.h"

namespace hc::bench {

void formatTime(double us, char* out, size_t n) {
  if (us >= 10000.0) {
    std::snprintf(out, n, "%7.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(out, n, "%7.1f", us);
  } else {
    std::snprintf(out, n, "%7.2f", us);
  }
}

void TablePrinter::printPreamble(size_t caseCount) const {
  char step[64];
  if (opts_.stepFactor > 1) {
    std::snprintf(step, sizeof(step), "%llu(factor)",
                  static_cast<unsigned long long>(opts_.stepFactor));
  } else {
    std::snprintf(step, sizeof(step), "%zu(bytes)", opts_.stepBytes);
  }
  const char* socket = opts_.socket.empty() ? std::getenv("HC_SOCKET") : opts_.socket.c_str();
  std::printf(
      "# hc-perf: nranks %d minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d "
      "validation: %d rows: %zu\n",
      opts_.nranks, opts_.minBytes, opts_.maxBytes, step, opts_.warmup, opts_.iters, opts_.check,
      caseCount);
  if (opts_.api == Api::Nccl) {
    std::printf(
        "# api: nccl, through %s: ncclGetUniqueId, ncclCommInitRank, ncclMemAlloc for host "
        "buffers; calls on the NULL stream (return once the operation completed)%s\n",
        ncclLibraryText().c_str(),
        anyRankOnDevice(opts_) ? ", device buffers' on their sim stream (once submitted)" : "");
  } else {
    std::printf(
        "# api: hc, through libhcclient: hc_get_unique_id, hc_comm_init_rank, "
        "hc_mem_alloc for host buffers\n");
  }
  if (opts_.latency) {
    std::printf(
        "# timing: latency: each operation alone (issued once the one before completed); "
        "time = mean, median latency at every size\n");
  } else if (opts_.api == Api::Nccl) {
    std::printf(
        "# timing: batches of %d calls, then a wait; each NULL-stream call returns once "
        "its operation completed, so a batch runs one operation at a time\n",
        opts_.iters);
  }
  if (opts_.smallOps) {
    std::printf(
        "# small ops: host_small_ops; collectives of at most 4 KiB per rank on host memory combine "
        "in the communicator's shared area when every rank sits on one daemon\n");
  }
  const char* segment = std::getenv("HC_SEGMENT_BYTES");
  if (opts_.sockets.empty()) {
    std::printf("# socket: %s, segment: %s bytes per rank\n",
                socket != nullptr ? socket : "(client library default)",
                segment != nullptr ? segment : "(daemon default)");
  } else {
    std::printf("# sockets: %zu daemons, the unique id from daemon 0, segment: %s bytes per rank\n",
                opts_.sockets.size(), segment != nullptr ? segment : "(daemon default)");
    for (size_t d = 0, r = 0; d < opts_.sockets.size(); ++d) {
      size_t first = r;
      while (r < static_cast<size_t>(opts_.nranks) &&
             daemonOfRank(opts_, static_cast<int>(r)) == static_cast<int>(d)) {
        ++r;
      }
      std::string ranks = r - 1 > first
                              ? "ranks " + std::to_string(first) + "-" + std::to_string(r - 1)
                              : "rank " + std::to_string(first);
      std::printf("#   daemon %zu: %s at %s\n", d, ranks.c_str(), opts_.sockets[d].c_str());
    }
  }
  if (anyRankOnDevice(opts_)) {
    std::string places;
    if (opts_.devices.size() == 1) {
      places = placeName(opts_.devices.front()) + " on every rank";
    } else {
      for (int r = 0; r < opts_.nranks; ++r) {
        places += (r == 0 ? "rank " : ", rank ") + std::to_string(r) + " " +
                  placeName(placeOfRank(opts_, r));
      }
    }
    std::printf("# buffers: %s (device buffers are ordered on one sim stream per rank)\n",
                places.c_str());
  }
  if (setup_.bounds) {
    const size_t llc = setup_.llc.bytes;
    std::printf("# bound: rows from %zu B, %zu x the last-level cache of %zu B (%s)\n",
                kBoundMinCaches * llc, kBoundMinCaches, llc, setup_.llc.source.c_str());
    std::printf(
        "#   max(read / B_read, written / B_write): the daemon's one-pass bytes at the best "
        "2-thread rates over %zu B, measured right before and after the row; hc-perf's "
        "fraction = bound / time, above 100%% a measurement error\n",
        setup_.streamBytes);
  } else {
    std::printf("# bound: none (%s)\n", setup_.noBoundReason.c_str());
  }
  if (setup_.daemonPid > 0) {
    std::printf(
        "# daemon CPU: hetero-commd pid %d, read by rank 0 around each timed batch; CPU-s/GB "
        "per GB of the size column (allreduce: the GB reduced), '-' for batches under 50 ms\n",
        static_cast<int>(setup_.daemonPid));
  } else {
    std::printf("# daemon CPU: not read (%s)\n", setup_.noCpuReason.c_str());
  }
  std::fflush(stdout);
}

void TablePrinter::printColumnHeader(OpKind op) const {
  if (opts_.sockets.empty()) {
    std::printf("#\n# %s, %d ranks, api %s\n#\n", opName(op), opts_.nranks, apiName(opts_.api));
  } else {
    std::printf("#\n# %s, %d ranks on %zu daemons, api %s\n#\n", opName(op), opts_.nranks,
                opts_.sockets.size(), apiName(opts_.api));
  }
  std::printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
      "          \n",
      "", "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
}

void TablePrinter::printRow(const Case& c, const std::vector<CaseReport>& reports,
                            const RowRates* rates) {
  if (c.firstOfOp) printColumnHeader(c.op);
  Row row{c, {-1, -1}, {0, 0}, {-1, -1}, false, 0, {0, 0}, rates != nullptr, {}};
  if (rates != nullptr) row.rates = *rates;
  std::printf("%12zu  %12zu  %8s  %6s  %6i", c.bytes, c.count,
              c.op == OpKind::Barrier ? "none" : dtypeName(c.dtype), redopName(c.redop), c.root);
  for (int side = 0; side < 2; ++side) {
    if (side == 1 && !hasInPlace(c.op)) {  // not run: no in-place form
      std::printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    double us = 0;
    int64_t wrong = -1;
    for (const CaseReport& r : reports) {
      us = std::max(us, r.timeUs[side]);
      if (r.wrong[side] >= 0) wrong = std::max<int64_t>(wrong, 0) + r.wrong[side];
    }
    double algBw = us > 0 ? static_cast<double>(c.bytes) / 1e3 / us : 0.0;  // bytes/1e9/s
    double busBw = algBw * busFactor(c.op, opts_.nranks);
    row.timeUs[side] = us;
    row.busBw[side] = busBw;
    for (const CaseReport& r : reports) {
      if (r.daemonCpuSec[side] >= 0) row.cpuSec[side] = r.daemonCpuSec[side];
    }
    if (c.op != OpKind::Barrier) {  // a barrier moves no data: keep it out of the average
      busBwSum_ += busBw;
      ++busBwCount_;
    }
    char t[32];
    formatTime(us, t, sizeof(t));
    if (wrong >= 0) {
      wrongTotal_ += wrong;
      std::printf("  %7s  %6.2f  %6.2f  %5g", t, algBw, busBw, static_cast<double>(wrong));
    } else {
      std::printf("  %7s  %6.2f  %6.2f  %5s", t, algBw, busBw, "N/A");
    }
  }
  std::printf("\n");
  for (const CaseReport& r : reports) {
    if (r.hasMedian) {
      row.hasMedian = true;
      row.medianUs = std::max(row.medianUs, r.medianUs);  // the slowest rank, as the time column
      row.tailUs[0] = std::max(row.tailUs[0], r.tailUs[0]);
      row.tailUs[1] = std::max(row.tailUs[1], r.tailUs[1]);
    }
  }
  group_.push_back(row);
  if (c.lastOfGroup) {
    printTrailers();
    group_.clear();
  }
  std::fflush(stdout);
}

void TablePrinter::printTrailers() {
  for (const Row& row : group_) {
    if (!row.hasMedian) continue;
    std::printf("# median latency at %zu: %.2f us", row.c.bytes, row.medianUs);
    if (opts_.latency) std::printf(" (p10 %.2f, p90 %.2f)", row.tailUs[0], row.tailUs[1]);
    std::printf("\n");
  }
  constexpr size_t kEverySizeFrom = size_t{1} << 20;
  const int flaggedBefore = aboveBound_;
  for (size_t i = 0; i < group_.size(); ++i) {
    const Row& row = group_[i];
    if (row.c.op == OpKind::Barrier) continue;  // no bytes: neither CPU per GB nor a bound
    if (!row.bounded && row.c.bytes < kEverySizeFrom && i + 1 != group_.size()) continue;
    if (row.bounded) {
      const StreamMeasurement& b = row.rates.before;
      const StreamMeasurement& a = row.rates.after;
      std::printf(
          "# rates at %zu: before read %.2f (%s) write %.2f (%s), after read %.2f (%s) "
          "write %.2f (%s) GB/s; the higher of each counts\n",
          row.c.bytes, b.best.readBps / 1e9, b.readKernel.c_str(), b.best.writeBps / 1e9,
          b.writeKernel.c_str(), a.best.readBps / 1e9, a.readKernel.c_str(), a.best.writeBps / 1e9,
          a.writeKernel.c_str());
    }
    for (int side = 0; side < 2; ++side) {
      if (row.timeUs[side] >= 0) printSide(row, side);
    }
  }
  if (aboveBound_ > flaggedBefore) {
    std::printf(
        "# ! above 100%%: the row took less time than its memory traffic needs at the best rates "
        "measured, which cannot be: the row's time or the rate measurement is wrong\n");
  }
}

void TablePrinter::printSide(const Row& row, int side) {
  const char* name = side == 0 ? "out-of-place" : "in-place";
  const double gb = static_cast<double>(opts_.iters) * static_cast<double>(row.c.bytes) / 1e9;
  // Another process's CPU clock leaves out the current run of a thread that is on a CPU at the
  // moment of reading until a scheduler tick or switch accounts it (the daemon's IPC thread spins
  // briefly after each operation), so a batch shorter than a few ticks reads near zero.
  constexpr double kMinCpuBatchSec = 0.05;
  const double batchSec = static_cast<double>(opts_.iters) * row.timeUs[side] * 1e-6;
  char cpu[48] = "CPU-s/GB -";
  if (row.cpuSec[side] >= 0 && gb > 0 && batchSec >= kMinCpuBatchSec) {
    std::snprintf(cpu, sizeof(cpu), "CPU-s/GB %.3f", row.cpuSec[side] / gb);
  }
  std::printf("# at %zu %s: busbw %.2f GB/s, daemon %s", row.c.bytes, name, row.busBw[side], cpu);
  if (!row.bounded) {
    std::printf(", bound -\n");
    return;
  }
  const OpBytes bytes = onePassBytes(row.c, opts_.nranks, side == 1);
  const StreamRates rates = bestOf(row.rates.before.best, row.rates.after.best);
  const double boundSec = boundSeconds(bytes, rates);
  const BoundVerdict v = judgeRow(boundSec, row.timeUs[side] * 1e-6);
  if (v.measurementError) ++aboveBound_;
  std::printf(
      ", bound %.0f us (read %.0f B at %.2f, write %.0f B at %.2f GB/s), "
      "hc-perf %.0f%% of the bound%s\n",
      boundSec * 1e6, bytes.read, rates.readBps / 1e9, bytes.written, rates.writeBps / 1e9,
      100.0 * v.fraction, v.measurementError ? " ! measurement error" : "");
}

void TablePrinter::printFooter() const {
  double avg = busBwCount_ > 0 ? busBwSum_ / busBwCount_ : 0.0;
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal_),
              wrongTotal_ != 0 ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g\n", avg);
  if (aboveBound_ > 0) {
    std::printf("# Rows above their bound: %d (measurement errors, see the '!' lines)\n",
                aboveBound_);
  }
  std::printf("# api: %s%s\n", apiName(opts_.api), opts_.latency ? ", latency mode" : "");
  std::printf("#\n");
  std::fflush(stdout);
}

}  // namespace hc::bench
