// hc-perf: measures hetero-commd's collectives the way nccl-tests measures NCCL's, from -N local
// rank processes it forks itself, through hc_* or (--api nccl) the shim's NCCL API. Rows of at
// least 4x the last-level cache are set against the memory-bound floor of the daemon's one pass,
// with memory bandwidth measured in this process right before and right after each such row
// while the ranks wait; the daemon's CPU time per GB is printed beside the bandwidth. Exits
// non-zero on any error or wrong element.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bound_model.h"
#include "bench/daemon_cpu.h"
#include "bench/launcher.h"
#include "bench/perf_api_nccl.h"
#include "bench/perf_cases.h"
#include "bench/perf_options.h"
#include "bench/perf_table.h"
#include "bench/stream_bench.h"
#include "common/paths.h"

namespace hc::bench {
namespace {

// Who the trailers' bound and CPU figures apply to, and the rows that get a bound (marked
// measuredBound, so the ranks wait for the parent's measurement before them).
BoundSetup planBounds(const Options& opts, std::vector<Case>* cases) {
  BoundSetup setup;
  // The bound covers one daemon's local step over host memory; across daemons the link bounds
  // the run (bench/compare-peers measures it), and device buffers add copies (see
  // bench/device-pipeline), so a bound would only mislead there.
  if (!opts.membw) {
    setup.noBoundReason = "-m 0";
  } else if (opts.sockets.size() >= 2) {
    setup.noBoundReason = "several daemons: the link, not memory, bounds the run";
  } else if (anyRankOnDevice(opts)) {
    setup.noBoundReason = "device buffers: copies the one-pass model does not count";
  } else {
    setup.llc = opts.llcBytes > 0 ? LastLevelCache{opts.llcBytes, "--llc"}
                                  : lastLevelCache("/sys/devices/system/cpu/cpu0");
    setup.bounds = setup.llc.bytes > 0;
    if (!setup.bounds) setup.noBoundReason = "last-level cache " + setup.llc.source + "; see --llc";
  }
  if (setup.bounds) {
    setup.streamBytes = std::max(kBoundMinCaches * setup.llc.bytes, size_t{64} << 20);
    for (Case& c : *cases) {
      c.measuredBound = c.op != OpKind::Barrier && rowGetsBound(c.bytes, setup.llc.bytes);
    }
  }
  if (opts.sockets.size() >= 2) {
    setup.noCpuReason = "several daemons";
  } else {
    std::string error;
    setup.daemonPid = daemonPid(defaultSocketPath(), &error);
    if (setup.daemonPid <= 0) setup.noCpuReason = "no daemon pid: " + error;
  }
  return setup;
}

// The communicator's id, made as the API's users make it: hc_get_unique_id, or ncclGetUniqueId
// (whose 128 bytes travel to the ranks in the same slot).
bool makeUniqueId(Api api, hc_unique_id_t* id, std::string* error) {
  if (api == Api::Nccl) return ncclUniqueIdInto(id, error);
  if (hc_status_t st = hc_get_unique_id(id); st != HC_OK) {
    const char* detail = hc_get_last_error(nullptr);
    *error = std::string("hc_get_unique_id failed: ") + hc_get_error_string(st) + ": " +
             (detail != nullptr ? detail : "(no detail)");
    return false;
  }
  return true;
}

int run(int argc, char** argv) {
  Options opts;
  if (auto exitCode = parseOptions(argc, argv, &opts)) return *exitCode;
  // The client library resolves the socket from HC_SOCKET at its first call. This process makes
  // the unique id, so it talks to the first daemon; the ranks inherit that, or, with several
  // daemons, each sets its own before its first call (launcher.cc).
  const std::string& first = opts.sockets.empty() ? opts.socket : opts.sockets.front();
  if (!first.empty()) ::setenv("HC_SOCKET", first.c_str(), 1);

  std::vector<Case> cases = buildCases(opts);
  // Each rank allocates a send and a receive buffer of the largest size from its segment; ask
  // for a segment that holds both (the daemon's default may not), unless the user chose one.
  // Device buffers are not in the segment.
  if (std::getenv("HC_SEGMENT_BYTES") == nullptr && anyRankOnHost(opts)) {
    constexpr size_t kAlign = size_t{2} << 20;
    size_t buffer = (std::max<size_t>(maxBufferBytes(cases), 1) + kAlign - 1) / kAlign * kAlign;
    ::setenv("HC_SEGMENT_BYTES", std::to_string(2 * buffer + 8 * kAlign).c_str(), 1);
  }
  const BoundSetup setup = planBounds(opts, &cases);
  TablePrinter table(opts, setup);
  table.printPreamble(cases.size());

  // hc_get_unique_id asks the daemon for its Peer address, the root of a multi-daemon
  // communicator. The client library drops this process's connection in every forked rank, and
  // each rank connects afresh, to its own daemon. Through NCCL the id is ncclGetUniqueId's, as a
  // framework's rank 0 makes it.
  hc_unique_id_t id;
  std::string error;
  if (!makeUniqueId(opts.api, &id, &error)) {
    std::fprintf(stderr, "hc-perf: %s\n", error.c_str());
    return 1;
  }

  RankSet ranks;
  if (!ranks.start(opts, cases, id, setup.daemonPid, &error)) {
    std::fprintf(stderr, "hc-perf: could not launch the ranks: %s\n", error.c_str());
    return 1;
  }
  // Mapped after the fork, so the ranks do not inherit it; its threads start and end inside each
  // measurement, while the ranks wait at their gate and the daemon has nothing to do.
  StreamBench stream(setup.bounds ? setup.streamBytes : 0);
  std::vector<CaseReport> reports;
  RowRates rates;
  bool haveAfter = false;  // rates.after was measured right after the case before this one
  for (size_t i = 0; i < cases.size(); ++i) {
    const bool bounded = cases[i].measuredBound;
    if (bounded) {
      rates.before = haveAfter ? rates.after : stream.measure();
      if (!ranks.openGate(&error)) {
        std::fprintf(stderr, "hc-perf: %s\n", error.c_str());
        ranks.killAll();
        return 1;
      }
    }
    if (!ranks.collect(static_cast<uint32_t>(i), &reports, &error)) {
      std::fflush(stdout);
      std::fprintf(stderr, "hc-perf: %s\n", error.c_str());
      ranks.killAll();
      return 1;
    }
    if (bounded) rates.after = stream.measure();
    haveAfter = bounded;
    table.printRow(cases[i], reports, bounded ? &rates : nullptr);
  }
  if (!ranks.finish(&error)) {
    std::fprintf(stderr, "hc-perf: %s\n", error.c_str());
    return 1;
  }
  table.printFooter();
  return table.wrongTotal() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hc::bench

int main(int argc, char** argv) { return hc::bench::run(argc, argv); }
