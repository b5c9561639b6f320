// hc_cma_exec_worker: the exec case of cross-memory attach (cma_exec_test.cc), sending frames by
// hand (raw_client.h), since libhcclient closes its connection in a forked child.
//
//   HC_SOCKET=PATH hc_cma_exec_worker
//
// The process connects, probes cross-memory attach with its /proc/self/mem and checks one
// allreduce from its heap. Then it forks: the parent, the process the daemon attached, execs
// /bin/cat (standing in for a setuid program: any new image will do), while the child keeps the
// socket and names addresses that the new image has mapped, as the send buffer of one operation
// and the receive buffer of another. The daemon must fail both, read nothing and write nothing
// there, and go on serving the connection. The child prints "WRONG ..." for what is not so,
// "after exec ... status=<code> text=<message>" for each failed operation and "#wrong <n>" at the
// end, then closes cat's stdin, and cat exits 0.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/ipc/frames.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

constexpr uint8_t kInt32 = 2;
constexpr uint8_t kSum = static_cast<uint8_t>(ipc::RedOp::Sum);
constexpr uint64_t kCount = 16;  // 64 bytes: the ELF header the new image starts with
constexpr int32_t kSentinel = -7;
constexpr const char* kProgram = "/bin/cat";

long gWrong = 0;

void wrong(const std::string& what) {
  ++gWrong;
  std::printf("WRONG %s\n", what.c_str());
}

ipc::BufferRef processMemory(uint64_t address) {
  ipc::BufferRef ref{};
  ref.offset = address;
  ref.kind = static_cast<uint8_t>(ipc::MemKind::ProcessMemory);
  return ref;
}

// A fresh one-rank communicator: a failed operation fails its communicator for good.
uint64_t commInit(RawClient& c) {
  auto init = c.commInit(1, 0);
  if (!init.isOk() || init->status != 0) {
    wrong("CommInit: " + (init.isOk() ? completionText(*init) : init.status().message()));
    return 0;
  }
  return init->value;
}

// Submits one int32 sum allreduce and returns its completion (status -1 when none came).
ipc::CompletionEntry allreduce(RawClient& c, uint64_t comm, ipc::BufferRef send,
                               ipc::BufferRef recv) {
  auto e = makeEntry(ipc::OpType::AllReduce, comm, kInt32, kSum, kCount, 0, 0);
  e.send = send;
  e.recv = recv;
  auto done = c.call(e);
  if (done.isOk()) return *done;
  ipc::CompletionEntry none{};
  none.status = -1;
  ipc::copyText(none.message, done.status().message());
  return none;
}

// Probes with a random pattern on a private page and this process's /proc/self/mem.
bool probe(RawClient& c) {
  auto* page = static_cast<uint8_t*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  uint8_t pattern[ipc::kCmaPatternBytes];
  if (page == MAP_FAILED || ::getrandom(pattern, sizeof(pattern), 0) != sizeof(pattern)) {
    wrong("probe page");
    return false;
  }
  std::memcpy(page, pattern, sizeof(pattern));
  const int mem = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  const int fds[1] = {mem};
  auto reply = c.cmaProbe(reinterpret_cast<uintptr_t>(page), pattern, fds);
  ::close(mem);
  if (!reply.isOk() || reply->status != 0) {
    wrong("probe: " + (reply.isOk() ? std::string(reply->message) : reply.status().message()));
    return false;
  }
  for (size_t i = 0; i < sizeof(pattern); ++i) {
    if (page[i] != static_cast<uint8_t>(~pattern[i])) {
      wrong("probe: the daemon's write did not land");
      return false;
    }
  }
  std::printf("probe: ok\n");
  return true;
}

// The start of the first mapping of /proc/<pid>/maps whose permissions begin with `perms`.
uint64_t mapping(pid_t pid, const std::string& perms) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, p;
    fields >> range >> p;
    if (p.starts_with(perms)) return std::strtoull(range.c_str(), nullptr, 16);
  }
  return 0;
}

// 64 bytes of the new image as the kernel gives them to a process with ptrace rights over it
// (this one, as root or its same-uid parent); empty when this process has none.
std::string peek(pid_t pid, uint64_t address) {
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string bytes(kCount * sizeof(int32_t), '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(address));
  ::close(fd);
  return n == static_cast<ssize_t>(bytes.size()) ? bytes : std::string();
}

void report(const char* what, const ipc::CompletionEntry& done) {
  std::printf("after exec %s: status=%d text=%s\n", what, done.status,
              completionText(done).c_str());
  if (done.status == 0) wrong(std::string("after exec ") + what + " succeeded");
}

// Runs in the child once `parent` has exec'd kProgram.
void afterExec(RawClient& c, pid_t parent, int32_t* segmentInts, uint64_t offset) {
  ::alarm(60);  // the parent's alarm is not inherited over fork
  // The program's first page (its ELF header) and its first writable data.
  const uint64_t text = mapping(parent, "r");
  const uint64_t data = mapping(parent, "rw-");
  if (text == 0 || data == 0) return wrong("no mappings of the new image");
  const std::string textBefore = peek(parent, text), dataBefore = peek(parent, data);
  std::printf("new image: %s, ELF header readable here: %s\n", kProgram,
              textBefore.starts_with("\177ELF") ? "yes" : "no");

  // The daemon reads its send buffer from the new image's first page.
  for (uint64_t i = 0; i < kCount; ++i) segmentInts[i] = kSentinel;
  ipc::BufferRef seg{};
  seg.offset = offset;
  report("read", allreduce(c, commInit(c), processMemory(text), seg));
  for (uint64_t i = 0; i < kCount; ++i) {
    if (segmentInts[i] != kSentinel) return wrong("the new image's bytes reached the segment");
  }
  // The daemon writes the result over the new image's data.
  for (uint64_t i = 0; i < kCount; ++i) segmentInts[i] = 0x41414141;
  report("write", allreduce(c, commInit(c), seg, processMemory(data)));
  if (peek(parent, data) != dataBefore) wrong("the new image's data changed");
  if (::kill(parent, 0) != 0) wrong("the new image died");

  // The connection still serves: segment buffers on a fresh communicator.
  ipc::BufferRef out{};
  out.offset = offset + kCount * sizeof(int32_t);
  auto done = allreduce(c, commInit(c), seg, out);
  if (done.status != 0 || segmentInts[kCount] != 0x41414141) {
    wrong("segment allreduce after the exec: " + completionText(done));
  } else {
    std::printf("after exec segment allreduce: ok\n");
  }
}

int run() {
  const char* socketPath = std::getenv("HC_SOCKET");
  auto client = RawClient::connect(socketPath != nullptr ? socketPath : "");
  if (!client.isOk() || !client->handshake().isOk()) {
    std::printf("ERROR connect: %s\n", client.status().message().c_str());
    return 3;
  }
  RawClient& c = *client;
  auto block = c.memAlloc(4096);
  if (!block.isOk() || !probe(c)) return 3;
  auto* ints = reinterpret_cast<int32_t*>(c.segment() + block->offset);

  // Before the exec the attach works: a heap send buffer, summed over one rank.
  std::vector<int32_t> heap(kCount);
  for (uint64_t i = 0; i < kCount; ++i) heap[i] = static_cast<int32_t>(i * 3 + 1);
  ipc::BufferRef seg{};
  seg.offset = block->offset;
  auto before =
      allreduce(c, commInit(c), processMemory(reinterpret_cast<uintptr_t>(heap.data())), seg);
  if (before.status != 0 || ints[kCount - 1] != heap[kCount - 1]) {
    wrong("allreduce before the exec: " + completionText(before));
    return 1;
  }
  std::printf("before exec allreduce: ok\n");
  std::fflush(stdout);

  // execd: closes in the parent's exec, after its old address space is let go. hold: the
  // child's end is cat's stdin, so cat runs until the child is done.
  int execd[2], hold[2];
  if (::pipe2(execd, O_CLOEXEC) != 0 || ::pipe2(hold, O_CLOEXEC) != 0) return 3;
  const pid_t attached = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return 3;
  if (child > 0) {
    ::close(execd[0]);
    ::close(hold[1]);
    ::dup2(hold[0], STDIN_FILENO);  // dup2 clears close-on-exec on the copy
    ::execl(kProgram, kProgram, static_cast<char*>(nullptr));
    std::printf("ERROR execl %s: %s\n", kProgram, std::strerror(errno));
    return 3;
  }
  ::close(execd[1]);
  ::close(hold[0]);
  pollfd p{execd[0], POLLIN, 0};
  char byte;
  if (::poll(&p, 1, 10'000) != 1 || ::read(execd[0], &byte, 1) != 0) {
    wrong("the parent did not exec");
  } else {
    afterExec(c, attached, ints, block->offset);
  }
  std::printf("#wrong %ld\n", gWrong);
  std::fflush(stdout);
  ::close(hold[1]);  // cat ends
  ::_exit(gWrong == 0 ? 0 : 1);
}

}  // namespace
}  // namespace hc::integ

int main() {
  // The test reads stdout from a file while the processes run: flush every line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::alarm(60);
  return hc::integ::run();
}
