// hc_rank_worker: one rank of a job, as its own process linking libhcclient. The integration
// tests and scripts/demo start N of these against one daemon (HC_SOCKET). hc_gpu_worker is the
// same program built with CUDA (worker_device_cuda.cc), for --device cuda:N.
//
//   hc_rank_worker --rank R --nranks N --id <256 hex digits>
//                  --mode matrix|grid|alltoallv|groups|biggroup|split|abort|badargs|demo|loop|
//                         shrink|revoke|shrinkmismatch|shrinkbusy|
//                         hang|idle|watchidle|mismatch|deviceops|devicesendrecv|streamwait|
//                         gpu|gpuorder|gpukill|gpumemory|gpuperf
//                  [--seed S] [--count C] [--seconds T] [--iters K] [--stall-after K]
//                  [--go-file PATH] [--field count|dtype|redop|root|op|sendcount|senddtype]
//                  [--phase group|split|abort] [--aborter R] [--exclude R,R,...]
//                  [--watchdog SECONDS]
//                  [--device sim:nvidia|amd:INDEX | cuda:INDEX]
//   hc_rank_worker --new-id   prints a fresh unique id (hc_get_unique_id) as hex
//   hc_rank_worker --probe    exits 0 when the daemon at HC_SOCKET serves a client (else 1, with
//                             the library's message on stderr)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "hetero_comm/hc.h"
#include "tests/integration/worker_device.h"
#include "tests/integration/worker_modes.h"
#include "tests/support/hex.h"

namespace {

using hc::integ::WorkerOptions;
using hc::test::parseHexId;

bool parseArgs(int argc, char** argv, WorkerOptions* o, hc_unique_id_t* id, int* watchdog) {
  bool haveId = false;
  auto u64 = [](const char* v) { return std::strtoull(v, nullptr, 10); };
  const std::map<std::string_view, std::function<void(const char*)>> setters = {
      {"--rank", [&](const char* v) { o->rank = std::atoi(v); }},
      {"--nranks", [&](const char* v) { o->nranks = std::atoi(v); }},
      {"--id", [&](const char* v) { haveId = parseHexId(v, id); }},
      {"--mode", [&](const char* v) { o->mode = v; }},
      {"--seed", [&](const char* v) { o->seed = u64(v); }},
      {"--count", [&](const char* v) { o->count = u64(v); }},
      {"--seconds", [&](const char* v) { o->seconds = std::atof(v); }},
      {"--iters", [&](const char* v) { o->iters = u64(v); }},
      {"--stall-after", [&](const char* v) { o->stallAfter = u64(v); }},
      {"--go-file", [&](const char* v) { o->goFile = v; }},
      {"--field", [&](const char* v) { o->field = v; }},
      {"--phase", [&](const char* v) { o->phase = v; }},
      {"--aborter", [&](const char* v) { o->aborter = std::atoi(v); }},
      {"--exclude", [&](const char* v) { o->exclude = v; }},
      {"--device", [&](const char* v) { o->device = v; }},
      {"--watchdog", [&](const char* v) { *watchdog = std::atoi(v); }},
  };
  if (argc % 2 != 1) return false;
  for (int i = 1; i + 1 < argc; i += 2) {
    auto it = setters.find(argv[i]);
    if (it == setters.end()) return false;
    it->second(argv[i + 1]);
  }
  return haveId && o->nranks > 0 && o->rank >= 0 && o->rank < o->nranks && !o->mode.empty();
}

// For scripts, which cannot call hc_get_unique_id or connect a SOCK_SEQPACKET socket themselves.
int runTool(std::string_view tool) {
  // A failure names the call and the library's message (a refused daemon says why).
  auto failed = [](const char* call, hc_status_t s) {
    std::fprintf(stderr, "%s: %s: %s\n", call, hc_get_error_string(s), hc_get_last_error(nullptr));
    return 1;
  };
  if (tool == "--new-id") {
    hc_unique_id_t id;
    if (hc_status_t s = hc_get_unique_id(&id); s != HC_OK) return failed("hc_get_unique_id", s);
    std::printf("%s\n", hc::test::toHex(id).c_str());
    return 0;
  }
  // A shared allocation needs a working connection: Hello, Welcome, MemAlloc.
  void* p = nullptr;
  if (hc_status_t s = hc_mem_alloc(&p, 4096); s != HC_OK) return failed("hc_mem_alloc", s);
  if (hc_status_t s = hc_mem_free(p); s != HC_OK) return failed("hc_mem_free", s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Tests read stdout from a file while the worker runs, and may SIGKILL it: flush every line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 2 &&
      (std::string_view(argv[1]) == "--new-id" || std::string_view(argv[1]) == "--probe")) {
    return runTool(argv[1]);
  }
  WorkerOptions o;
  hc_unique_id_t id;
  std::memset(&id, 0, sizeof(id));
  const std::map<std::string_view, int (*)(hc_comm_t, const WorkerOptions&)> modes = {
      {"matrix", hc::integ::runMatrix},
      {"alltoallv", hc::integ::runAllToAllV},
      {"groups", hc::integ::runGroups},
      {"biggroup", hc::integ::runBigGroup},
      {"split", hc::integ::runSplit},
      {"abort", hc::integ::runAbort},
      {"shrink", hc::integ::runShrink},
      {"revoke", hc::integ::runRevoke},
      {"shrinkmismatch", hc::integ::runShrinkMismatch},
      {"shrinkbusy", hc::integ::runShrinkBusy},
      {"badargs", hc::integ::runBadArgs},
      {"demo", hc::integ::runDemo},
      {"loop", hc::integ::runLoop},
      {"hang", hc::integ::runHang},
      {"idle", hc::integ::runIdle},
      {"watchidle", hc::integ::runWatchIdle},
      {"mismatch", hc::integ::runMismatch},
      {"grid", hc::integ::runGrid},
      {"deviceops", hc::integ::runDeviceOps},
      {"devicesendrecv", hc::integ::runDeviceSendRecv},
      {"streamwait", hc::integ::runStreamWait},
      {"gpu", hc::integ::runGpu},
      {"gpuorder", hc::integ::runGpuOrder},
      {"gpukill", hc::integ::runGpuKill},
      {"gpumemory", hc::integ::runGpuMemory},
      {"gpuperf", hc::integ::runGpuPerf}};
  // Modes that wait on purpose (for a go file, for a stalled peer, forever) run without one.
  int watchdog = 60;
  const std::set<std::string_view> unwatched = {"loop",     "hang", "idle", "watchidle",
                                                "mismatch", "demo", "streamwait"};
  // Checked before init: a rank that gives up after joining would leave its peers waiting.
  if (!parseArgs(argc, argv, &o, &id, &watchdog) || modes.count(o.mode) == 0) {
    std::fprintf(stderr, "usage: hc_rank_worker --rank R --nranks N --id HEX --mode MODE ...\n");
    return hc::integ::kExitUsage;
  }
  hc::integ::DeviceChoice device;
  std::string why = "expected sim:nvidia:N, sim:amd:N or cuda:N";
  if (!hc::integ::parseDeviceChoice(o.device, &device) ||
      !hc::integ::workerSupports(device, &why)) {
    std::fprintf(stderr, "%s: --device %s: %s\n", argv[0], o.device.c_str(), why.c_str());
    return hc::integ::kExitUsage;
  }
  if (watchdog > 0 && unwatched.count(o.mode) == 0) hc::integ::startWatchdog(watchdog);
  hc_comm_t comm = nullptr;
  hc_status_t rc = hc_comm_init_rank(&comm, o.nranks, id, o.rank);
  if (rc != HC_OK) {
    hc::integ::printStatus("result", rc, nullptr);
    std::printf("init failed\n");
    return hc::integ::kExitOpFailed;
  }
  std::printf("ready\n");
  int code = modes.at(o.mode)(comm, o);
  // A healthy communicator is destroyed cleanly (which the daemon must accept); a failed or
  // deliberately broken one is aborted, which never waits for other ranks. Abort mode has ended
  // the communicator itself.
  if (o.mode == "abort") return code;
  const std::set<std::string_view> brokenOnPurpose = {"mismatch", "gpukill", "shrink", "revoke",
                                                      "shrinkbusy"};
  if (code == hc::integ::kExitOk && brokenOnPurpose.count(o.mode) == 0) {
    rc = hc_comm_destroy(comm);
    if (rc != HC_OK) {
      hc::integ::printStatus("destroy", rc, nullptr);
      code = hc::integ::kExitOpFailed;
    }
  } else {
    (void)hc_comm_abort(comm);
  }
  return code;
}
