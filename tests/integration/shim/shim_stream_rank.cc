// hc_shim_stream_rank / hc_shim_stream_rank_rccl: one rank of the stream-semantics job
// (shim_stream_test.cc), written against NCCL's C API only, over a fake GPU runtime loaded by path
// before the shim's first call.
//
//   hc_shim_stream_rank --new-id                   prints a fresh ncclGetUniqueId as hex
//   hc_shim_stream_rank --rank R --nranks N --id HEX --sync DIR [--abort main|split|none]
//
// Expected values are computed here from the inputs, never read back from the shim.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/shim/shim_stream_rank.h"

namespace hc::shim_stream {
namespace {

// The whole rank takes a few seconds; past this it is stuck, and says where.
constexpr auto kRankDeadline = std::chrono::seconds(30);
constexpr auto kStepWait = std::chrono::seconds(20);

std::atomic<const char*> gStep{"start"};
int gRank = -1;

// Ends the process with an ERROR line naming the step it is stuck in: a hang must fail the rank,
// never the whole test run by its timeout.
void startWatchdog() {
  std::thread([] {
    std::this_thread::sleep_for(kRankDeadline);
    std::printf("ERROR rank %d: stuck for %lld s at step '%s'\n", gRank,
                static_cast<long long>(kRankDeadline.count()), gStep.load());
    std::fflush(stdout);
    std::_Exit(3);
  }).detach();
}

bool parseHex(const char* hex, ncclUniqueId* id) {
  if (std::strlen(hex) != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned v = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
    id->internal[i] = static_cast<char>(v);
  }
  return true;
}

int printNewId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId: %s: %s\n", ncclGetErrorString(r),
                 ncclGetLastError(nullptr));
    return 1;
  }
  for (char c : id.internal) std::printf("%02x", static_cast<unsigned char>(c));
  std::printf("\n");
  return 0;
}

struct Args {
  int rank = -1;
  int nranks = 0;
  const char* id = nullptr;
  const char* sync = nullptr;
  AbortRole abort = AbortRole::None;
};

bool parseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--rank") {
      a->rank = std::atoi(value);
    } else if (flag == "--nranks") {
      a->nranks = std::atoi(value);
    } else if (flag == "--id") {
      a->id = value;
    } else if (flag == "--sync") {
      a->sync = value;
    } else if (flag == "--abort") {
      const std::string v = value;
      if (v != "main" && v != "split" && v != "none") return false;
      a->abort = v == "main" ? AbortRole::Main : v == "split" ? AbortRole::Split : AbortRole::None;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && a->rank >= 0 && a->nranks > a->rank && a->id != nullptr &&
         a->sync != nullptr;
}

}  // namespace

void pass(const char* check, const std::string& detail) {
  std::printf("ok %s: %s\n", check, detail.c_str());
}

void wrong(Rank& r, const char* check, const std::string& detail) {
  std::printf("WRONG %s (rank %d): %s\n", check, r.rank, detail.c_str());
  r.wrong++;
}

bool expectResult(Rank& r, const char* what, ncclResult_t got, ncclResult_t want) {
  if (got == want) return true;
  std::printf("ERROR rank %d: %s returned %d (%s), want %d: %s\n", r.rank, what,
              static_cast<int>(got), ncclGetErrorString(got), static_cast<int>(want),
              ncclGetLastError(r.comm));
  r.wrong++;
  return false;
}

void setStep(const char* step) { gStep.store(step); }

void signalStep(const Rank& r, const std::string& name) {
  const std::string path = r.syncDir + "/" + name;
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

bool waitStep(Rank& r, const std::string& name) {
  const std::string path = r.syncDir + "/" + name;
  const auto deadline = std::chrono::steady_clock::now() + kStepWait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("ERROR rank %d: step '%s' of another rank did not come within %lld s\n", r.rank,
              name.c_str(), static_cast<long long>(kStepWait.count()));
  r.wrong++;
  return false;
}

std::vector<LogLine> parseLog(const std::string& text) {
  std::vector<LogLine> lines;
  std::istringstream in(text);
  std::string row;
  while (std::getline(in, row)) {
    const size_t first = row.find(' ');
    const size_t second = first == std::string::npos ? first : row.find(' ', first + 1);
    if (second == std::string::npos) continue;
    LogLine line;
    line.seq = std::strtoull(row.c_str(), nullptr, 10);
    line.stream = row.substr(first + 1, second - first - 1);
    line.what = row.substr(second + 1);
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<LogLine> linesOf(const std::vector<LogLine>& log, const std::string& stream,
                             uint64_t after) {
  std::vector<LogLine> out;
  for (const LogLine& line : log) {
    if (line.seq > after && line.stream == stream) out.push_back(line);
  }
  return out;
}

std::string describe(const std::vector<LogLine>& lines) {
  std::string out;
  for (const LogLine& l : lines) {
    out += "\n    " + std::to_string(l.seq) + " " + l.stream + " " + l.what;
  }
  return out.empty() ? " (none)" : out;
}

}  // namespace hc::shim_stream

int main(int argc, char** argv) {
  using namespace hc::shim_stream;  // NOLINT: this program's own namespace
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 2 && std::strcmp(argv[1], "--new-id") == 0) return printNewId();
  Args args;
  if (!parseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: %s --new-id | --rank R --nranks N --id HEX --sync DIR "
                 "[--abort main|split|none]\n",
                 argv[0]);
    return 2;
  }
  gRank = args.rank;
  startWatchdog();

  // The runtime comes first, as in a framework: the client looks for it once, at its first call.
  std::string error;
  std::unique_ptr<FakeGpu> gpu = FakeGpu::load(&error);
  if (!gpu) {
    std::printf("ERROR rank %d: %s\n#wrong 1\n", args.rank, error.c_str());
    return 1;
  }
  Rank r;
  r.rank = args.rank;
  r.nranks = args.nranks;
  r.gpu = gpu.get();
  r.syncDir = args.sync;
  r.abortRole = args.abort;
  r.stream = gpu->newStream(&error);
  ncclUniqueId id;
  if (r.stream == nullptr || !parseHex(args.id, &id)) {
    std::printf("ERROR rank %d: %s\n#wrong 1\n", r.rank,
                r.stream == nullptr ? error.c_str() : "--id is not a unique id in hex");
    return 1;
  }
  std::printf("rank %d of %d: %s over the fake %s runtime\n", r.rank, r.nranks,
#if defined(HC_SHIM_STREAM_RCCL)
              "librccl.so.1",
#else
              "libnccl.so.2",
#endif
              gpu->runtime());

  setStep("ncclCommInitRank");
  if (expectOk(r, "ncclCommInitRank", ncclCommInitRank(&r.comm, r.nranks, id, r.rank))) {
    runOrderingChecks(r);
    runAbortCheck(r);  // aborts every communicator of the rank
  }
  setStep("cleanup");
  if (!gpu->destroyStream(r.stream)) wrong(r, "cleanup", "the stream could not be destroyed");
  std::printf("#wrong %d\n", r.wrong);
  return r.wrong == 0 ? 0 : 1;
}
