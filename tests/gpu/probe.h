// What the probe's primitives share: their options, their outcome, and the process plumbing they
// use (running a copy of this program, passing fds, progress notes).
//
// Every primitive runs in a process of its own, started by fork+exec of this program with
// `--child NAME`; a CUDA primitive that needs two processes starts two more (`--role a|b`). No
// process initialises CUDA before it forks: the driver's threads and mappings do not survive fork.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hc::gpuprobe {

enum class Verdict { Pass, Fail, Skip };

// One primitive's result: the verdict and the rest of its line (figures, or the reason).
struct Outcome {
  Verdict verdict = Verdict::Fail;
  std::string text;
};
inline Outcome pass(std::string text) { return {Verdict::Pass, std::move(text)}; }
inline Outcome fail(std::string text) { return {Verdict::Fail, std::move(text)}; }
inline Outcome skip(std::string text) { return {Verdict::Skip, std::move(text)}; }

const char* verdictName(Verdict verdict);
// "PASS <name> <text>": the line the runner prints and appends to the report.
std::string resultLine(const std::string& name, const Outcome& outcome);
// Parses a result line of primitive `name`; false when `line` is not one.
bool parseResultLine(const std::string& line, const std::string& name, Outcome* out);

struct ProbeOptions {
  std::string self;                     // this program, for fork+exec of helpers
  std::string driver = "libcuda.so.1";  // what dlopen loads
  int device = 0;                       // CUDA ordinal
  std::string role;                     // "" (the primitive's process), "a" or "b"
  int sockFd = -1;                      // with a role: the socket to the other process
};

// Writes all of `text` to fd, retrying after signals and short writes.
bool writeAll(int fd, const std::string& text);

// Writes a progress note, "step <who> <what>", to stdout: the runner names the last step of each
// `who` of a primitive that timed out. `who` is the process ("-", or "A" and "B" of a pair), or a
// part of one ("env").
void note(const char* who, const std::string& what);

// Starts this program as `--child name` (plus `--role role --sock sockFd` when role is set),
// with stdout on `stdoutFd` and stderr inherited; a new process group when `newGroup`, so that a
// timeout kills the primitive's helpers with it. `sockFd` is the one descriptor it inherits
// besides 0-2. Returns the pid, or -1 (errno set) when fork fails; a failed exec exits 127.
pid_t spawnSelf(const ProbeOptions& options, const std::string& name, const std::string& role,
                int sockFd, int stdoutFd, bool newGroup);
// A probe process exits 0 after a pass or a skip and 1 after a failure; anything else (a signal,
// exec's 127) is worth reporting.
bool endedAbnormally(int status);
// "exit 0", "killed by signal 11 (Segmentation fault)".
std::string describeWaitStatus(int status);
// Waits for pid up to timeoutMs; true and *status once it ended, false when it still runs.
bool waitWithTimeout(pid_t pid, int timeoutMs, int* status);

// Waits up to timeoutMs for output on fd and appends its complete lines to *lines; a partial
// line waits in *pending. False at end of file (the partial line is added then).
bool readLines(int fd, int timeoutMs, std::string* pending, std::vector<std::string>* lines);

// Runs a two-process CUDA primitive: starts roles A and B of `name` over a socketpair, relays
// their notes, and returns A's result (B reports to A). Initialises no CUDA itself.
Outcome runPair(const ProbeOptions& options, const std::string& name);

// A fixed-size message between the two processes of a primitive (SOCK_SEQPACKET).
struct PeerMessage {
  uint32_t ok = 0;     // B's reply: 1 when its part passed
  uint64_t bytes = 0;  // the allocation's size
  uint8_t handle[64];  // a CUipcMemHandle
  char text[512];      // B's figures or its reason
};
// Sends `message`, with `fd` attached by SCM_RIGHTS when fd >= 0. "" or why not.
std::string sendPeer(int sock, const PeerMessage& message, int fd = -1);
// Receives one message and the fd attached to it (-1 when none). "" or why not ("closed").
std::string receivePeer(int sock, PeerMessage* message, int* fd = nullptr);
// Copies `text` into message->text, cut to fit.
void setPeerText(PeerMessage* message, const std::string& text);

// CLOCK_MONOTONIC, which every process of the machine shares.
int64_t monotonicNanos();
int64_t monotonicMicros();
// "12.3": microseconds with one decimal.
std::string formatMicros(double micros);
std::string errnoText(int error);

// The primitives (env_probe.cc, posix_probes.cc, cuda_probes.cc, cuda_stream_probe.cc).
Outcome probeEnv(const ProbeOptions& options);
Outcome probeMemfdSeals(const ProbeOptions& options);
Outcome probeScmRights(const ProbeOptions& options);
Outcome probeSharedFutex(const ProbeOptions& options);
Outcome probeCudaIpcLegacy(const ProbeOptions& options);
Outcome probeCudaVmmFd(const ProbeOptions& options);
Outcome probeCudaStreamWaitValue(const ProbeOptions& options);

}  // namespace hc::gpuprobe
