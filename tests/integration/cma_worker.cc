// hc_cma_worker: one rank of the cross-memory-attach tests (cma_test.cc), as its own process
// linking only libhcclient. Every buffer is plain malloc memory, never hc_mem_alloc, placed off
// page and 16-byte boundaries, and every result is checked against values computed here.
//
//   hc_cma_worker --rank R --nranks N --id <256 hex digits> [--drop-dumpable] [--fork-check]
//   hc_cma_worker --path-only
//   hc_cma_worker --exec-without-capabilities PROGRAM [ARGS...]
//
// Prints "memory-path: <hc_get_memory_path>", "WRONG ..." for the first wrong elements, "ERROR
// ..." for a failed call and "#wrong <n>" at the end; exits 0 only when everything was right.
// --drop-dumpable: prctl(PR_SET_DUMPABLE, 0) before connecting, so that no other process may
//   ptrace this one without CAP_SYS_PTRACE: cross-memory attach must work all the same, since
//   the process hands the daemon its own /proc/self/mem.
// --fork-check: rank 0 forks a child, which must get a connection and a probe of its own (see
//   forkCheck); every rank then joins one last allreduce on the parent's communicator.
// --path-only connects, prints the memory path and exits. The last form starts the daemon of the
// no-capability test with none at all, as the shipped systemd unit runs it.
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "hetero_comm/hc.h"
#include "tests/support/hex.h"

namespace hc::integ {
namespace {

constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCallFailed = 3;
constexpr float kSentinel = -7.0f;  // in receive memory the daemon must not (or not yet) write
constexpr long kMaxReported = 5;    // WRONG lines per process

// Small integers: their sums are exact in float whatever the order of the additions.
float value(int rank, size_t i, int salt) {
  return static_cast<float>(((rank + 1) * 131 + i * 7 + static_cast<size_t>(salt) * 17) % 1021);
}
// Beyond 32 bits, so a value cut to 32 bits anywhere shows.
int64_t value64(int rank, size_t i) {
  return (int64_t{rank + 1} << 40) - static_cast<int64_t>(i) * 3 - 5;
}

// count elements of plain malloc memory, one element past malloc's alignment: the daemon gets
// addresses that are neither page- nor 16-byte aligned.
template <typename T>
class HeapArray {
 public:
  explicit HeapArray(size_t count)
      : count_(count), raw_(static_cast<T*>(std::malloc((count + 1) * sizeof(T)))) {}
  ~HeapArray() { std::free(raw_); }
  HeapArray(const HeapArray&) = delete;
  HeapArray& operator=(const HeapArray&) = delete;

  T* data() { return raw_ == nullptr ? nullptr : raw_ + 1; }
  T& operator[](size_t i) { return raw_[1 + i]; }
  size_t size() const { return count_; }

 private:
  size_t count_;
  T* raw_;
};

// Counts wrong elements and failed calls, and prints the first of them.
class Checker {
 public:
  explicit Checker(std::string prefix) : prefix_(std::move(prefix)) {}

  long wrong = 0;

  void call(const char* what, hc_status_t rc, hc_comm_t comm) {
    if (rc == HC_OK) return;
    ++failedCalls_;
    std::printf("ERROR %s%s: %s: %s\n", prefix_.c_str(), what, hc_get_error_string(rc),
                hc_get_last_error(comm));
  }
  template <typename T>
  void expect(const std::string& what, size_t i, T got, T want) {
    if (got == want) return;
    if (++wrong <= kMaxReported) {
      std::printf("WRONG %s%s [%zu]: got %s, want %s\n", prefix_.c_str(), what.c_str(), i,
                  std::to_string(got).c_str(), std::to_string(want).c_str());
    }
  }
  void printMemoryPath() {
    const char* path = nullptr;
    call("hc_get_memory_path", hc_get_memory_path(&path), nullptr);
    std::printf("%smemory-path: %s\n", prefix_.c_str(), path != nullptr ? path : "(none)");
  }
  int finish() const {
    std::printf("%s#wrong %ld\n", prefix_.c_str(), wrong);
    if (failedCalls_ > 0) return kExitCallFailed;
    return wrong > 0 ? kExitWrong : 0;
  }

 private:
  std::string prefix_;
  long failedCalls_ = 0;
};

struct Job {
  hc_comm_t comm;
  int rank;
  int nranks;
};

// Waits for a request the call returned (none when the call failed).
void finishOp(Checker& check, const Job& job, const char* what, hc_status_t rc, hc_request_t* req) {
  check.call(what, rc, job.comm);
  if (*req != nullptr) check.call("hc_wait", hc_wait(req), job.comm);
}

std::string named(const char* op, size_t count) { return op + (" n=" + std::to_string(count)); }

void checkAllreduce(Checker& check, const Job& job, size_t count) {
  // Out of place, float: the send buffer must come back untouched.
  HeapArray<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = value(job.rank, i, 1);
    recv[i] = kSentinel;
  }
  hc_request_t req = nullptr;
  finishOp(
      check, job, "hc_allreduce",
      hc_allreduce(send.data(), recv.data(), count, HC_FLOAT32, HC_SUM, job.comm, nullptr, &req),
      &req);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < job.nranks; ++r) sum += value(r, i, 1);
    check.expect(named("allreduce", count), i, recv[i], sum);
    check.expect(named("allreduce send", count), i, send[i], value(job.rank, i, 1));
  }
  // In place, int64.
  HeapArray<int64_t> both(count);
  for (size_t i = 0; i < count; ++i) both[i] = value64(job.rank, i);
  finishOp(check, job, "hc_allreduce in place",
           hc_allreduce(both.data(), both.data(), count, HC_INT64, HC_SUM, job.comm, nullptr, &req),
           &req);
  for (size_t i = 0; i < count; ++i) {
    int64_t sum = 0;
    for (int r = 0; r < job.nranks; ++r) sum += value64(r, i);
    check.expect(named("allreduce in place", count), i, both[i], sum);
  }
}

void checkAllgather(Checker& check, const Job& job, size_t count) {
  const size_t n = static_cast<size_t>(job.nranks);
  HeapArray<float> send(count), recv(n * count);
  for (size_t i = 0; i < count; ++i) send[i] = value(job.rank, i, 2);
  for (size_t i = 0; i < n * count; ++i) recv[i] = kSentinel;
  hc_request_t req = nullptr;
  finishOp(check, job, "hc_allgather",
           hc_allgather(send.data(), recv.data(), count, HC_FLOAT32, job.comm, nullptr, &req),
           &req);
  // In place: this rank's block already sits at its place in the receive buffer.
  HeapArray<float> inPlace(n * count);
  const size_t mine = static_cast<size_t>(job.rank) * count;
  for (size_t i = 0; i < n * count; ++i) inPlace[i] = kSentinel;
  for (size_t i = 0; i < count; ++i) inPlace[mine + i] = value(job.rank, i, 3);
  finishOp(check, job, "hc_allgather in place",
           hc_allgather(inPlace.data() + mine, inPlace.data(), count, HC_FLOAT32, job.comm, nullptr,
                        &req),
           &req);
  for (int r = 0; r < job.nranks; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const size_t at = static_cast<size_t>(r) * count + i;
      check.expect(named("allgather", count), at, recv[at], value(r, i, 2));
      check.expect(named("allgather in place", count), at, inPlace[at], value(r, i, 3));
    }
  }
}

// Each rank sends to the next and receives from the previous, in one group (one rank: itself).
void checkSendRecvRing(Checker& check, const Job& job, size_t count) {
  const int next = (job.rank + 1) % job.nranks;
  const int prev = (job.rank + job.nranks - 1) % job.nranks;
  HeapArray<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = value(job.rank, i, 4);
    recv[i] = kSentinel;
  }
  // The send is waited for too: the daemon reads heap memory when the send is matched, which
  // may be after the receive has completed, so the buffer must live until then.
  hc_request_t sendReq = nullptr, recvReq = nullptr;
  check.call("hc_group_start", hc_group_start(), job.comm);
  check.call("hc_send", hc_send(send.data(), count, HC_FLOAT32, next, job.comm, nullptr, &sendReq),
             job.comm);
  check.call("hc_recv", hc_recv(recv.data(), count, HC_FLOAT32, prev, job.comm, nullptr, &recvReq),
             job.comm);
  finishOp(check, job, "hc_group_end", hc_group_end(), &recvReq);
  if (sendReq != nullptr) check.call("hc_wait send", hc_wait(&sendReq), job.comm);
  for (size_t i = 0; i < count; ++i) {
    check.expect(named("recv", count), i, recv[i], value(prev, i, 4));
  }
}

// Uneven parts (some empty) with gaps between them: the gaps must keep what they held.
void checkAlltoallv(Checker& check, const Job& job, size_t count) {
  const size_t n = static_cast<size_t>(job.nranks);
  auto partCount = [&](int from, int to) { return count / 8 + from + 2 * to; };
  std::vector<size_t> sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
  size_t sendExtent = 0, recvExtent = 0;
  for (int p = 0; p < job.nranks; ++p) {
    const size_t at = static_cast<size_t>(p);
    sendCounts[at] = partCount(job.rank, p);
    sendDispls[at] = sendExtent;
    sendExtent += sendCounts[at] + 1;
    recvCounts[at] = partCount(p, job.rank);
    recvDispls[at] = recvExtent;
    recvExtent += recvCounts[at] + 2;
  }
  HeapArray<float> send(sendExtent), recv(recvExtent);
  for (size_t i = 0; i < sendExtent; ++i) send[i] = kSentinel;
  for (size_t i = 0; i < recvExtent; ++i) recv[i] = kSentinel;
  for (int p = 0; p < job.nranks; ++p) {
    const size_t at = static_cast<size_t>(p);
    for (size_t i = 0; i < sendCounts[at]; ++i) {
      send[sendDispls[at] + i] = value(job.rank, i, 5 + p);
    }
  }
  hc_request_t req = nullptr;
  finishOp(check, job, "hc_alltoallv",
           hc_alltoallv(send.data(), sendCounts.data(), sendDispls.data(), recv.data(),
                        recvCounts.data(), recvDispls.data(), HC_FLOAT32, job.comm, nullptr, &req),
           &req);
  std::vector<float> want(recvExtent, kSentinel);
  for (int p = 0; p < job.nranks; ++p) {
    const size_t at = static_cast<size_t>(p);
    for (size_t i = 0; i < recvCounts[at]; ++i) {
      want[recvDispls[at] + i] = value(p, i, 5 + job.rank);
    }
  }
  for (size_t i = 0; i < recvExtent; ++i) {
    check.expect(named("alltoallv", count), i, recv[i], want[i]);
  }
}

// An operation issued without a request: hc_comm_finalize is what waits for it.
void checkUntrackedAllreduce(Checker& check, const Job& job, size_t count) {
  HeapArray<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = value(job.rank, i, 9);
    recv[i] = kSentinel;
  }
  check.call(
      "hc_allreduce untracked",
      hc_allreduce(send.data(), recv.data(), count, HC_FLOAT32, HC_SUM, job.comm, nullptr, nullptr),
      job.comm);
  check.call("hc_comm_finalize", hc_comm_finalize(job.comm), job.comm);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < job.nranks; ++r) sum += value(r, i, 9);
    check.expect(named("untracked allreduce", count), i, recv[i], sum);
  }
}

// Removes every capability from every set an exec could take one from (as root, exec grants the
// bounding set), then runs the program, as CapabilityBoundingSet= empty does in the systemd
// unit. The test reads the result from /proc and skips when a capability survived.
int execWithoutCapabilities(char** argv) {
  // Past CAP_LAST_CAP too: the kernel may know capabilities these headers do not.
  for (int cap = 0; cap < 64; ++cap) (void)::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  (void)::syscall(SYS_capset, &header, data);
  ::execv(argv[0], argv);
  std::perror("execv");
  return 127;
}

struct Options {
  int rank = -1;
  int nranks = 0;
  hc_unique_id_t id{};
  bool haveId = false;
  bool dropDumpable = false;
  bool forkCheck = false;
  bool pathOnly = false;
};

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--drop-dumpable") {
      o->dropDumpable = true;
    } else if (a == "--fork-check") {
      o->forkCheck = true;
    } else if (a == "--path-only") {
      o->pathOnly = true;
    } else if (a == "--rank" && hasValue) {
      o->rank = std::atoi(argv[++i]);
    } else if (a == "--nranks" && hasValue) {
      o->nranks = std::atoi(argv[++i]);
    } else if (a == "--id" && hasValue) {
      o->haveId = test::parseHexId(argv[++i], &o->id);
    } else {
      return false;
    }
  }
  if (o->pathOnly) return argc == 2;
  return o->haveId && o->nranks > 0 && o->rank >= 0 && o->rank < o->nranks;
}

// Runs in the forked child of rank 0. The child shares the parent's addresses but not its
// memory (copy on write), and the daemon's attach reaches the parent's address space. So the
// child changes its copy of `send`, and its operations must read that copy and write its own
// `recv`: through a connection and probe of its own, never the parent's.
int childAfterFork(hc_comm_t parentComm, HeapArray<float>& send, HeapArray<float>& recv) {
  Checker check("child ");
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i % 89) + 1000.0f;
  // The parent's communicator belongs to the parent's connection.
  hc_status_t rc = hc_allreduce(send.data(), recv.data(), send.size(), HC_FLOAT32, HC_SUM,
                                parentComm, nullptr, nullptr);
  if (rc != HC_INVALID_ARGUMENT) {
    std::printf("WRONG child: the parent's communicator gave %s, want HC_INVALID_ARGUMENT\n",
                hc_get_error_string(rc));
    ++check.wrong;
  }
  check.printMemoryPath();
  hc_unique_id_t id;
  hc_comm_t own = nullptr;
  check.call("child hc_get_unique_id", hc_get_unique_id(&id), nullptr);
  check.call("child hc_comm_init_rank", hc_comm_init_rank(&own, 1, id, 0), nullptr);
  if (own != nullptr) {
    hc_request_t req = nullptr;
    check.call(
        "child hc_allreduce",
        hc_allreduce(send.data(), recv.data(), send.size(), HC_FLOAT32, HC_SUM, own, nullptr, &req),
        own);
    if (req != nullptr) check.call("child hc_wait", hc_wait(&req), own);
    for (size_t i = 0; i < recv.size(); ++i) {
      check.expect("child allreduce", i, recv[i], static_cast<float>(i % 89) + 1000.0f);
    }
    check.call("child hc_comm_destroy", hc_comm_destroy(own), nullptr);
  }
  return check.finish();
}

// Rank 0 forks; the parent then checks that the child's operation touched none of its memory.
void forkCheck(Checker& check, hc_comm_t comm) {
  constexpr size_t kCount = 3001;
  HeapArray<float> send(kCount), recv(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    send[i] = static_cast<float>(i % 97);
    recv[i] = kSentinel;
  }
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) {
    std::printf("ERROR fork: %s\n", std::strerror(errno));
    ++check.wrong;
    return;
  }
  if (child == 0) {
    int code = childAfterFork(comm, send, recv);
    std::fflush(stdout);
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("WRONG fork child ended with status 0x%x\n", static_cast<unsigned>(status));
    ++check.wrong;
  }
  for (size_t i = 0; i < kCount; ++i) {
    check.expect("parent send after the child's op", i, send[i], static_cast<float>(i % 97));
    check.expect("parent recv after the child's op", i, recv[i], kSentinel);
  }
}

int run(const Options& o) {
  if (o.dropDumpable && ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    std::perror("prctl(PR_SET_DUMPABLE)");
    return kExitUsage;
  }
  Checker check("");
  // Connects, so the probe runs here, before any communicator exists.
  check.printMemoryPath();
  if (o.pathOnly) return check.finish();
  hc_comm_t comm = nullptr;
  check.call("hc_comm_init_rank", hc_comm_init_rank(&comm, o.nranks, o.id, o.rank), nullptr);
  if (comm == nullptr) return check.finish();
  const Job job{comm, o.rank, o.nranks};
  for (size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{100003}}) {
    checkAllreduce(check, job, count);
    checkAllgather(check, job, count);
    checkSendRecvRing(check, job, count);
    checkAlltoallv(check, job, count);
  }
  if (o.forkCheck && o.rank == 0) forkCheck(check, comm);
  // Last, an operation without a request: hc_comm_finalize is what waits for it.
  checkUntrackedAllreduce(check, job, 5001);
  check.call("hc_comm_destroy", hc_comm_destroy(comm), nullptr);
  return check.finish();
}

}  // namespace
}  // namespace hc::integ

int main(int argc, char** argv) {
  // The test reads stdout from a file while the worker runs: flush every line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc >= 3 && std::string_view(argv[1]) == "--exec-without-capabilities") {
    return hc::integ::execWithoutCapabilities(argv + 2);
  }
  hc::integ::Options o;
  if (!hc::integ::parseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: hc_cma_worker --rank R --nranks N --id HEX [--drop-dumpable] "
                 "[--fork-check]\n       hc_cma_worker --path-only\n       hc_cma_worker "
                 "--exec-without-capabilities PROGRAM [ARGS...]\n");
    return hc::integ::kExitUsage;
  }
  // A rank whose peer died would wait forever; the test would report it, but later.
  ::alarm(120);
  return hc::integ::run(o);
}
