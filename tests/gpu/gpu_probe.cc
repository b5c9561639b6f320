// hc_gpu_probe: tests, one line each, the primitives the design needs from a machine: sealed
// memfd segments, SCM_RIGHTS, shared futexes, CUDA memory shared by legacy IPC handle and by VMM
// POSIX fd, and a stream held by cuStreamWaitValue32 on host memory.
//
//   hc_gpu_probe [--only NAME[,NAME]] [--device N] [--report FILE] [--timeout SECONDS]
//                [--driver LIBRARY] [--verbose]
//
// Prints `PASS <name> <figures>`, `FAIL <name> <why>` or `SKIP <name> <why>` per primitive and
// exits 0 when nothing failed (1 otherwise, 2 on a bad command line). Each primitive runs in its
// own process group (fork+exec of this program with `--child NAME`), under its own timeout, so a
// crash or a hang costs one line and never the rest. This process never loads the CUDA driver.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpu/probe.h"

namespace hc::gpuprobe {
namespace {

struct Primitive {
  const char* name;
  Outcome (*run)(const ProbeOptions&);
};
constexpr Primitive kPrimitives[] = {
    {"env", probeEnv},
    {"memfd_seals", probeMemfdSeals},
    {"scm_rights", probeScmRights},
    {"shared_futex", probeSharedFutex},
    {"cuda_ipc_legacy", probeCudaIpcLegacy},
    {"cuda_vmm_fd", probeCudaVmmFd},
    {"cuda_stream_wait_value", probeCudaStreamWaitValue},
};

const Primitive* findPrimitive(const std::string& name) {
  for (const Primitive& primitive : kPrimitives) {
    if (name == primitive.name) return &primitive;
  }
  return nullptr;
}

struct RunOptions {
  std::set<std::string> only;  // empty: every primitive
  std::string report;
  int timeoutSeconds = 20;
  bool verbose = false;
  std::string child;  // set: this process runs that primitive
};

// The process group of the primitive running now, for the signal handler.
volatile sig_atomic_t runningGroup = 0;

// A runner stopped by a signal takes the running primitive's processes with it: they live in a
// group of their own, which a terminal's ^C or `timeout` does not reach.
void stopRunning(int sig) {
  if (runningGroup > 0) ::kill(-runningGroup, SIGKILL);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Runs one primitive in a child process and turns whatever happens to it into an outcome.
Outcome runIsolated(const ProbeOptions& options, const RunOptions& run, const std::string& name) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return fail("pipe2: " + errnoText(errno));
  const pid_t pid = spawnSelf(options, name, "", -1, out[1], true);
  const int spawnError = errno;
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    return fail("fork: " + errnoText(spawnError));
  }
  runningGroup = pid;

  const int64_t deadline = monotonicMicros() + int64_t{run.timeoutSeconds} * 1'000'000;
  Outcome result;
  bool haveResult = false;
  std::vector<std::pair<std::string, std::string>> lastSteps;  // who, what
  std::string pending;
  bool open = true;
  bool timedOut = false;
  while (open) {
    const int64_t left = deadline - monotonicMicros();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    std::vector<std::string> lines;
    open = readLines(out[0], static_cast<int>(std::min<int64_t>(left / 1000 + 1, 1000)), &pending,
                     &lines);
    for (const std::string& line : lines) {
      if (parseResultLine(line, name, &result)) {
        haveResult = true;
      } else if (line.compare(0, 5, "step ") == 0 && line.size() > 7) {
        const std::string who = line.substr(5, line.find(' ', 5) - 5);
        const std::string what = line.substr(std::min(line.size(), 6 + who.size()));
        bool known = false;
        for (auto& [w, last] : lastSteps) {
          if (w != who) continue;
          last = what;
          known = true;
        }
        if (!known) lastSteps.emplace_back(who, what);
        if (run.verbose)
          std::fprintf(stderr, "%s: %s %s\n", name.c_str(), who.c_str(), what.c_str());
      } else {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), line.c_str());
      }
    }
  }
  int status = 0;
  if (!timedOut) {
    const int64_t left = std::max<int64_t>(deadline - monotonicMicros(), 0);
    timedOut = !waitWithTimeout(pid, static_cast<int>(left / 1000), &status);
  }
  // Whatever is left of the group goes: a helper that outlived the primitive, or all of it.
  (void)::kill(-pid, SIGKILL);
  if (timedOut) (void)::waitpid(pid, &status, 0);
  runningGroup = 0;
  ::close(out[0]);

  std::string steps;
  for (const auto& [who, what] : lastSteps) {
    steps += (steps.empty() ? "; last step: " : ", ") + (who == "-" ? "" : who + " ") + what;
  }
  const std::string limit = std::to_string(run.timeoutSeconds) + " s";
  if (timedOut && haveResult) {
    return fail("(timeout) its result came (" + resultLine(name, result) +
                ") but it did not exit within " + limit);
  }
  if (timedOut) return fail("(timeout) no result within " + limit + steps);
  if (!haveResult) return fail("(no result: " + describeWaitStatus(status) + steps + ")");
  if (endedAbnormally(status)) {
    return fail(result.text + " (" + verdictName(result.verdict) +
                ", but the process then ended: " + describeWaitStatus(status) + ")");
  }
  return result;
}

int runChild(const ProbeOptions& options, const std::string& name) {
  const Primitive* primitive = findPrimitive(name);
  if (primitive == nullptr) return 2;
  const Outcome outcome = primitive->run(options);
  // B reports to A over the socket; its notes already said how it went.
  if (options.role != "b") (void)writeAll(STDOUT_FILENO, resultLine(name, outcome) + "\n");
  return outcome.verdict == Verdict::Fail ? 1 : 0;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "hc_gpu_probe: %s\n"
               "usage: hc_gpu_probe [--only NAME[,NAME]] [--device N] [--report FILE]\n"
               "                    [--timeout SECONDS] [--driver LIBRARY] [--verbose]\n"
               "primitives:",
               why);
  for (const Primitive& primitive : kPrimitives) std::fprintf(stderr, " %s", primitive.name);
  std::fprintf(stderr, "\n");
  return 2;
}

// Parses a whole decimal number in [low, high]; false otherwise.
bool parseInt(const char* text, int low, int high, int* out) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high) return false;
  *out = static_cast<int>(value);
  return true;
}

// This program's path for exec: /proc/self/exe where the kernel offers it.
std::string selfPath(const char* argv0) {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return argv0;
  return std::string(path, static_cast<size_t>(n));
}

int runAll(const ProbeOptions& options, const RunOptions& run) {
  int report = -1;
  if (!run.report.empty()) {
    report = ::open(run.report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (report < 0) {
      std::fprintf(stderr, "hc_gpu_probe: cannot open %s: %s\n", run.report.c_str(),
                   errnoText(errno).c_str());
      return 2;
    }
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, stopRunning);
  int counts[3] = {0, 0, 0};  // by Verdict
  for (const Primitive& primitive : kPrimitives) {
    if (!run.only.empty() && run.only.count(primitive.name) == 0) continue;
    const Outcome outcome = runIsolated(options, run, primitive.name);
    ++counts[static_cast<int>(outcome.verdict)];
    // Written as each primitive ends, so a run killed later keeps what it did.
    const std::string line = resultLine(primitive.name, outcome) + "\n";
    (void)writeAll(STDOUT_FILENO, line);
    if (report >= 0) (void)writeAll(report, line);
  }
  if (report >= 0) ::close(report);
  std::fprintf(stderr, "hc_gpu_probe: %d passed, %d failed, %d skipped\n",
               counts[static_cast<int>(Verdict::Pass)], counts[static_cast<int>(Verdict::Fail)],
               counts[static_cast<int>(Verdict::Skip)]);
  return counts[static_cast<int>(Verdict::Fail)] == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hc::gpuprobe

int main(int argc, char** argv) {
  using namespace hc::gpuprobe;
  ProbeOptions options;
  RunOptions run;
  options.self = selfPath(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    const bool takesValue = arg == "--only" || arg == "--device" || arg == "--report" ||
                            arg == "--timeout" || arg == "--driver" || arg == "--child" ||
                            arg == "--role" || arg == "--sock";
    if (takesValue && value == nullptr) return usage((arg + " needs a value").c_str());
    if (takesValue) ++i;
    if (arg == "--only") {
      std::string list = value;
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string name = list.substr(start, comma - start);
        if (findPrimitive(name) == nullptr)
          return usage(("no primitive named '" + name + "'").c_str());
        run.only.insert(name);
        start = comma + 1;
      }
    } else if (arg == "--device") {
      if (!parseInt(value, 0, 1023, &options.device)) return usage("--device takes an ordinal");
    } else if (arg == "--timeout") {
      if (!parseInt(value, 1, 3600, &run.timeoutSeconds)) return usage("--timeout takes seconds");
    } else if (arg == "--report") {
      run.report = value;
    } else if (arg == "--driver") {
      options.driver = value;
    } else if (arg == "--verbose") {
      run.verbose = true;
    } else if (arg == "--child") {  // the rest: how the probe starts its own processes
      run.child = value;
    } else if (arg == "--role") {
      options.role = value;
    } else if (arg == "--sock") {
      if (!parseInt(value, 3, 1 << 20, &options.sockFd)) return usage("--sock takes an fd");
    } else if (arg == "--help" || arg == "-h") {
      usage("one line per primitive: PASS|FAIL|SKIP <name> <figures or why>");
      return 0;
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  if (!run.child.empty()) return runChild(options, run.child);
  return runAll(options, run);
}
