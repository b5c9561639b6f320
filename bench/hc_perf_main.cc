// hc-perf: measures hetero-commd's collectives the way nccl-tests measures NCCL's, from -N local
// rank processes it forks itself, through hc_* or (--api nccl) the shim's NCCL API, and compares
// allreduce with the one-pass memory-bound limit measured in this process first. Exits non-zero
// on any error or wrong element.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "bench/launcher.h"
#include "bench/membw.h"
#include "bench/perf_api_nccl.h"
#include "bench/perf_cases.h"
#include "bench/perf_options.h"
#include "bench/perf_table.h"

namespace hc::bench {
namespace {

// The allreduce sizes that get a one-pass limit: every size from 1 MiB, and the largest.
std::vector<size_t> limitSizes(const std::vector<Case>& cases) {
  std::set<size_t> sizes;
  size_t largest = 0;
  for (const Case& c : cases) {
    if (c.op != OpKind::AllReduce) continue;
    if (c.bytes >= (size_t{1} << 20)) sizes.insert(c.bytes);
    largest = std::max(largest, c.bytes);
  }
  bool any = false;
  for (const Case& c : cases) any = any || c.op == OpKind::AllReduce;
  if (any) sizes.insert(largest);
  return {sizes.begin(), sizes.end()};
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
  MemBwReport membw;
  const std::vector<size_t> sizes = limitSizes(cases);
  // The one-pass limit bounds one daemon's local step over host memory; across daemons the link
  // bounds the run (bench/compare-peers measures it), and device buffers add copies (see
  // bench/device-pipeline), so the limit would only mislead there.
  const bool haveMembw =
      opts.membw && !sizes.empty() && opts.sockets.size() < 2 && !anyRankOnDevice(opts);
  if (haveMembw) membw = measureMemBw(opts.nranks, sizes);  // before any fork: it runs threads

  TablePrinter table(opts, haveMembw ? &membw : nullptr);
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
  if (!ranks.start(opts, cases, id, &error)) {
    std::fprintf(stderr, "hc-perf: could not launch the ranks: %s\n", error.c_str());
    return 1;
  }
  std::vector<CaseReport> reports;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!ranks.collect(static_cast<uint32_t>(i), &reports, &error)) {
      std::fflush(stdout);
      std::fprintf(stderr, "hc-perf: %s\n", error.c_str());
      ranks.killAll();
      return 1;
    }
    table.printRow(cases[i], reports);
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
