// The ordering checks of a stream-check rank, (a) to (g). Each operation is an allreduce whose send
// data a fake "kernel" queued just before it on the same stream writes; the kernel holds until the
// call has returned (a gate the rank opens), so that
//   - a call that waited for its operation (or for the stream) would never return before the
//     kernel ended, which the log shows (c);
//   - an operation not ordered on the stream would read the sentinel the send buffer held before
//     the kernel ran, and its result would be wrong (a, b, d, f).
// The fake's log gives the order the stream ran its items in: the kernel, then the operation's
// protocol (a host function that submits it, a wait on its done flag, a host function that
// finishes it), preceded by the scalar's copy for a pre-multiplied sum.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/shim/shim_stream_rank.h"

namespace hc::shim_stream {
namespace {

using Clock = std::chrono::steady_clock;

// How long a kernel waits for its call to return before it runs anyway: only a call that blocks
// where it must not gets there, and then the log says so.
constexpr auto kGate = std::chrono::seconds(10);
// The kernel sleeps this long before it waits for the gate, so that it is running, not merely
// queued, when the call comes.
constexpr int kKernelDelayMs = 20;
constexpr float kSendSentinel = -1.0f;
constexpr float kRecvSentinel = -2.0f;

enum class Mem { Device, Vmm, Host };

const char* memName(Mem m) {
  return m == Mem::Device ? "ncclMemAlloc device memory"
         : m == Mem::Vmm  ? "a VMM allocation (exported as an fd)"
                          : "host memory";
}

// Every buffer of the ordering checks. ncclMemAlloc memory is checked when it is made and after
// it is freed (check e).
class Buffers {
 public:
  explicit Buffers(Rank& r) : r_(r) {}
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  // Null, with the failure counted, when the memory cannot be had.
  float* get(Mem mem, size_t count) {
    const size_t bytes = count * sizeof(float);
    void* p = nullptr;
    if (mem == Mem::Device) {
      if (!expectOk(r_, "ncclMemAlloc", ncclMemAlloc(&p, bytes))) return nullptr;
      size_t size = 0;
      if (!r_.gpu->isDeviceMemory(p, &size) || size < bytes) {
        wrong(r_, "e",
              "ncclMemAlloc(" + std::to_string(bytes) + ") gave " + pointer(p) +
                  ", which the fake " + r_.gpu->runtime() +
                  " runtime does not know as device memory of that size");
        eFailed_ = true;
      }
      memAlloc_.push_back(p);
    } else if (mem == Mem::Vmm) {
      p = r_.gpu->newVmmAllocation(bytes);
      if (p == nullptr) {
        wrong(r_, "setup", "the fake made no VMM allocation");
      } else {
        vmm_.push_back(p);
      }
    } else {
      host_.push_back(std::make_unique<float[]>(count));
      p = host_.back().get();
    }
    return static_cast<float*>(p);
  }

  // Frees everything. ncclMemFree must return the memory to the runtime: the fake no longer knows
  // the address afterwards.
  void release() {
    for (void* p : memAlloc_) {
      if (!expectOk(r_, "ncclMemFree", ncclMemFree(p))) continue;
      size_t size = 0;
      if (r_.gpu->isDeviceMemory(p, &size)) {
        wrong(r_, "e", "after ncclMemFree(" + pointer(p) + ") the runtime still has it");
        eFailed_ = true;
      }
    }
    for (void* p : vmm_) r_.gpu->freeVmmAllocation(p);
    host_.clear();
    if (!eFailed_ && !memAlloc_.empty()) {
      pass("e", "ncclMemAlloc gave " + std::to_string(memAlloc_.size()) +
                    " allocations of the fake " + r_.gpu->runtime() +
                    " runtime's device memory, used by the operations, and ncclMemFree "
                    "returned each to the runtime");
    }
    memAlloc_.clear();
    vmm_.clear();
  }

 private:
  static std::string pointer(const void* p) {
    char text[32];
    std::snprintf(text, sizeof(text), "%p", p);
    return text;
  }

  Rank& r_;
  std::vector<void*> memAlloc_;
  std::vector<void*> vmm_;
  std::vector<std::unique_ptr<float[]>> host_;
  bool eFailed_ = false;
};

// The "kernel" queued before each operation: holds until released (or kGate), then writes the
// send data, and the scalar of a pre-multiplied sum.
struct Produce {
  float* send = nullptr;
  int family = 0;
  int rank = 0;
  float* scalar = nullptr;
  float scalarValue = 0;
  std::atomic<bool> released{false};
};

void produce(void* arg) {
  auto* p = static_cast<Produce*>(arg);
  const auto deadline = Clock::now() + kGate;
  while (!p->released.load() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (size_t i = 0; i < kCount; ++i) p->send[i] = valueOf(p->family, p->rank, i);
  if (p->scalar != nullptr) *p->scalar = p->scalarValue;
}

// A pre-multiplied sum's scalar on rank q: what that rank's kernel writes.
float scalarOf(int q) { return static_cast<float>(2 + q); }

struct OpSpec {
  const char* check = "";
  int family = 0;
  void* stream = nullptr;  // null: the NULL stream
  float* send = nullptr;
  float* recv = nullptr;
  ncclRedOp_t op = ncclSum;
  float* scalar = nullptr;  // device memory of a pre-multiplied sum's scalar, or null
};

struct OpRun {
  bool enqueued = false;       // the call succeeded and the stream drained
  std::vector<LogLine> lines;  // the stream's items from the kernel on
  uint64_t returnedSeq = 0;    // the note made as soon as the call returned
  float recvAtReturn = 0;
  std::string resultProblem;  // "" when every element is right
};

// The lines the stream must show for one operation: its kernel, the scalar's copy for a
// pre-multiplied sum, then stream_ops.cc's three steps. Each row: a prefix and a suffix of `what`.
std::vector<std::pair<std::string, std::string>> expectedItems(const std::string& kernel,
                                                               bool scalarCopy) {
  std::vector<std::pair<std::string, std::string>> rows = {{"kernel " + kernel, " begin"},
                                                           {"kernel " + kernel, " end"}};
  if (scalarCopy) {
    rows.push_back({"copy 4 bytes", " begin"});
    rows.push_back({"copy 4 bytes", " end"});
  }
  const std::vector<std::pair<std::string, std::string>> steps = {
      {"host-fn", " begin"}, {"host-fn", " end"},      // submits the operation
      {"wait ", " begin"},   {"wait ", " satisfied"},  // its done flag
      {"host-fn", " begin"}, {"host-fn", " end"}};     // takes the completion
  rows.insert(rows.end(), steps.begin(), steps.end());
  return rows;
}

bool matches(const std::string& what, const std::pair<std::string, std::string>& row) {
  return what.size() >= row.first.size() + row.second.size() &&
         what.compare(0, row.first.size(), row.first) == 0 &&
         what.compare(what.size() - row.second.size(), row.second.size(), row.second) == 0;
}

// "" when the lines are exactly the expected items; else what differs, with the lines.
std::string protocolProblem(const std::vector<LogLine>& lines, const std::string& kernel,
                            bool scalarCopy) {
  const auto rows = expectedItems(kernel, scalarCopy);
  bool same = lines.size() == rows.size();
  for (size_t i = 0; same && i < rows.size(); ++i) same = matches(lines[i].what, rows[i]);
  if (same) return "";
  std::string want;
  for (const auto& row : rows) want += "\n    " + row.first + "..." + row.second;
  return "the stream ran" + describe(lines) + "\n  want" + want;
}

// Enqueues the kernel and the operation, opens the gate once the call returned, drains the stream.
OpRun runOp(Rank& r, const OpSpec& spec) {
  OpRun run;
  for (size_t i = 0; i < kCount; ++i) {
    spec.send[i] = kSendSentinel;
    spec.recv[i] = kRecvSentinel;
  }
  if (spec.scalar != nullptr) *spec.scalar = 1.0f;  // the value before the kernel
  Produce p;
  p.send = spec.send;
  p.family = spec.family;
  p.rank = r.rank;
  p.scalar = spec.scalar;
  p.scalarValue = scalarOf(r.rank);
  const std::string kernel = std::string("produce-") + spec.check;
  const uint64_t anchor = r.gpu->note(std::string(spec.check) + ": queue the kernel");
  if (!r.gpu->kernel(spec.stream, kernel.c_str(), kKernelDelayMs, produce, &p)) {
    wrong(r, spec.check, "the fake refused the kernel");
    return run;
  }
  const ncclResult_t result = ncclAllReduce(spec.send, spec.recv, kCount, ncclFloat32, spec.op,
                                            r.comm, static_cast<hcNcclStream_t>(spec.stream));
  run.returnedSeq = r.gpu->note(std::string(spec.check) + ": ncclAllReduce returned");
  run.recvAtReturn = spec.recv[0];
  p.released.store(true);
  const bool called = expectOk(r, spec.check, result);
  if (!r.gpu->synchronize(spec.stream)) wrong(r, spec.check, "the stream did not synchronize");
  if (!called) return run;
  run.enqueued = true;
  run.lines = linesOf(r.gpu->log(), r.gpu->streamName(spec.stream), anchor);
  for (size_t i = 0; i < kCount && run.resultProblem.empty(); ++i) {
    float want = 0;
    for (int q = 0; q < r.nranks; ++q) {
      want += (spec.scalar != nullptr ? scalarOf(q) : 1.0f) * valueOf(spec.family, q, i);
    }
    if (spec.recv[i] != want) {
      run.resultProblem = "element " + std::to_string(i) + " of " + std::to_string(kCount) +
                          " is " + std::to_string(spec.recv[i]) + ", want " + std::to_string(want) +
                          (spec.recv[i] == kRecvSentinel ? " (never written)" : "");
    }
  }
  return run;
}

// The kernel's end, or 0 when the log lacks it.
uint64_t kernelEnd(const OpRun& run) {
  for (const LogLine& l : run.lines) {
    if (matches(l.what, {"kernel ", " end"})) return l.seq;
  }
  return 0;
}

// The first host function after the kernel: the one that submits the operation.
uint64_t submitBegin(const OpRun& run) {
  for (const LogLine& l : run.lines) {
    if (l.what == "host-fn begin") return l.seq;
  }
  return 0;
}

// Checks one operation's result and the order its stream ran it in. Returns "" or the problems.
std::string orderProblems(const OpSpec& spec, const OpRun& run) {
  std::string problems;
  if (!run.resultProblem.empty()) problems += "\n  result: " + run.resultProblem;
  const std::string protocol =
      protocolProblem(run.lines, std::string("produce-") + spec.check, spec.scalar != nullptr);
  if (!protocol.empty()) problems += "\n  order: " + protocol;
  return problems;
}

// Checks that the call returned while the kernel queued before it still ran, so before its
// operation could have completed. Returns "" or the problem.
std::string returnProblem(const OpRun& run) {
  const uint64_t end = kernelEnd(run);
  if (end != 0 && run.returnedSeq < end && run.recvAtReturn == kRecvSentinel) return "";
  return "\n  the call returned at seq " + std::to_string(run.returnedSeq) +
         ", the kernel queued before it ended at seq " + std::to_string(end) +
         "; recv[0] at return was " + std::to_string(run.recvAtReturn);
}

std::string where(const Rank& r, void* stream) {
  return (stream == nullptr ? "the NULL stream (" : "stream ") + r.gpu->streamName(stream) +
         (stream == nullptr ? ")" : "");
}

// (a) and (c) on the rank's stream; (b) on the NULL stream; (d) host buffers on the stream.
void checkOrder(Rank& r, const char* check, int family, void* stream, Mem sendMem, Mem recvMem,
                Buffers& buffers) {
  setStep(check);
  OpSpec spec;
  spec.check = check;
  spec.family = family;
  spec.stream = stream;
  spec.send = buffers.get(sendMem, kCount);
  spec.recv = buffers.get(recvMem, kCount);
  if (spec.send == nullptr || spec.recv == nullptr) return;
  const OpRun run = runOp(r, spec);
  if (!run.enqueued) return;
  // (c) is checked on a's operation and reported apart; the others include it.
  const bool separateReturn = std::strcmp(check, "a") == 0;
  const std::string problems =
      orderProblems(spec, run) + (separateReturn ? "" : returnProblem(run));
  const std::string buffersText =
      std::string("send in ") + memName(sendMem) + ", recv in " + memName(recvMem);
  const std::string op = "allreduce on " + where(r, stream) + " (" + buffersText + ")";
  if (!problems.empty()) {
    wrong(r, check, op + ":" + problems);
  } else {
    pass(check, op +
                    " used the data of the kernel queued before it: its submit host function "
                    "began at seq " +
                    std::to_string(submitBegin(run)) + ", after the kernel ended at seq " +
                    std::to_string(kernelEnd(run)) +
                    ", then the done-flag wait and the finish host function" +
                    (separateReturn ? "" : "; the call returned while the kernel ran"));
  }
  if (!separateReturn) return;
  const std::string early = returnProblem(run);
  if (!early.empty()) {
    wrong(r, "c", op + ":" + early);
  } else {
    pass("c", "ncclAllReduce returned (seq " + std::to_string(run.returnedSeq) +
                  ") while the kernel queued before it still ran (it ended at seq " +
                  std::to_string(kernelEnd(run)) + "), recv untouched");
  }
}

// (f) a pre-multiplied sum whose scalar, in ncclMemAlloc memory, a kernel writes just before it.
void checkDeviceScalar(Rank& r, Buffers& buffers, Mem bufferMem) {
  setStep("f");
  OpSpec spec;
  spec.check = "f";
  spec.family = 6;
  spec.stream = r.stream;
  spec.send = buffers.get(bufferMem, kCount);
  spec.recv = buffers.get(bufferMem, kCount);
  spec.scalar = buffers.get(Mem::Device, 1);
  if (spec.send == nullptr || spec.recv == nullptr || spec.scalar == nullptr) return;
  *spec.scalar = 1.0f;
  ncclRedOp_t op;
  if (!expectOk(
          r, "ncclRedOpCreatePreMulSum",
          ncclRedOpCreatePreMulSum(&op, spec.scalar, ncclFloat32, ncclScalarDevice, r.comm))) {
    return;
  }
  spec.op = op;
  const OpRun run = runOp(r, spec);
  expectOk(r, "ncclRedOpDestroy", ncclRedOpDestroy(op, r.comm));
  if (!run.enqueued) return;
  const std::string problems = orderProblems(spec, run) + returnProblem(run);
  if (!problems.empty()) {
    wrong(r, "f", "pre-multiplied sum with its scalar in device memory:" + problems);
    return;
  }
  pass("f",
       "pre-multiplied sum used the scalar the kernel wrote just before it (" +
           std::to_string(scalarOf(r.rank)) +
           " on this rank, 1 before the kernel): the "
           "scalar was copied on the stream after the kernel, before the submit host function");
}

// (g) a stream being captured into a graph: the collective is refused and nothing is queued.
void checkCapture(Rank& r, Buffers& buffers) {
  setStep("g");
  float* send = buffers.get(Mem::Host, kCount);
  float* recv = buffers.get(Mem::Host, kCount);
  if (send == nullptr || recv == nullptr) return;
  if (!r.gpu->setCapturing(r.stream, true)) {
    wrong(r, "g", "the fake refused to mark the stream capturing");
    return;
  }
  const uint64_t before = r.gpu->note("g: stream capturing");
  const ncclResult_t result = ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, r.comm,
                                            static_cast<hcNcclStream_t>(r.stream));
  const std::string text = ncclGetLastError(r.comm);
  const uint64_t after = r.gpu->note("g: call returned");
  r.gpu->setCapturing(r.stream, false);
  std::vector<LogLine> queued;
  for (const LogLine& l : linesOf(r.gpu->log(), r.gpu->streamName(r.stream), before)) {
    if (l.seq < after) queued.push_back(l);
  }
  std::string problems;
  if (result != ncclInvalidUsage) {
    problems += "\n  returned " + std::to_string(result) + " (" + ncclGetErrorString(result) +
                "), want ncclInvalidUsage";
  }
  if (text.find("graph") == std::string::npos) {
    problems += "\n  ncclGetLastError does not mention the graph: \"" + text + "\"";
  }
  if (!queued.empty()) problems += "\n  work was queued on the captured stream:" + describe(queued);
  r.gpu->synchronize(r.stream);  // whatever was queued wrongly must not outlive the buffers
  if (!problems.empty()) {
    wrong(r, "g", "allreduce on a stream being captured:" + problems);
    return;
  }
  pass("g",
       "allreduce on a stream being captured returned ncclInvalidUsage, queued nothing, "
       "and ncclGetLastError says \"" +
           text + "\"");
}

}  // namespace

void runOrderingChecks(Rank& r) {
  // Where the daemon maps the rank's device memory, the operations take it as buffers; where it
  // cannot, host buffers on the same streams, ordered all the same.
  const bool device = r.gpu->daemonMapsDeviceMemory();
  const Mem deviceOrHost = device ? Mem::Device : Mem::Host;
  Buffers buffers(r);
  checkOrder(r, "a", 1, r.stream, deviceOrHost, deviceOrHost, buffers);
  checkOrder(r, "b", 2, nullptr, deviceOrHost, device ? Mem::Vmm : Mem::Host, buffers);
  checkOrder(r, "d", 4, r.stream, Mem::Host, Mem::Host, buffers);
  checkCapture(r, buffers);
  // After the refused call: the communicator still works, and f's kernel wrote the scalar.
  checkDeviceScalar(r, buffers, deviceOrHost);
  setStep("e");
  buffers.release();
}

}  // namespace hc::shim_stream
