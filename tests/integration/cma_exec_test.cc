// Cross-memory attach is bound to the client's address space, not its pid (protocol.h,
// CmaProbeFrame): a client that execs another program after its probe, while a child keeps the
// socket, gets its operations on client memory failed, and the daemon reads and writes nothing
// of the new image (hc_cma_exec_worker). Probes made by hand: the daemon takes nothing but the
// client's own mem file, and a probe without it ends the connection.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "common/status.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The line of the output that starts with prefix, without it ("" when there is none).
std::string lineAfter(const std::string& output, const std::string& prefix) {
  for (size_t pos = output.find(prefix); pos != std::string::npos;
       pos = output.find(prefix, pos + 1)) {
    if (pos != 0 && output[pos - 1] != '\n') continue;
    const size_t begin = pos + prefix.size();
    return output.substr(begin, output.find('\n', begin) - begin);
  }
  return "";
}

TEST(CrossMemoryAttachExecTest, ExecAfterTheProbeLeavesTheNewImageUnreachable) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto worker = ChildProcess::spawn({HC_CMA_EXEC_WORKER_PATH}, daemon->clientEnv(),
                                    daemon->dir() + "/exec-worker.log", &error);
  ASSERT_NE(worker, nullptr) << error;
  // The process the test started becomes cat, which ends when the forked child is done.
  ASSERT_TRUE(worker->waitExit(std::chrono::seconds(60))) << worker->output();
  const std::string out = worker->output();
  SCOPED_TRACE("worker output:\n" + out + "--- daemon log tail:\n" + daemon->logTail());
  EXPECT_EQ(worker->exitCode(), 0);
  EXPECT_TRUE(contains(out, "probe: ok\n"));
  EXPECT_TRUE(contains(out, "before exec allreduce: ok\n"));
  EXPECT_TRUE(contains(out, "new image: /bin/cat"));
  // The premise: the addresses named are the new image's, readable to whoever may ptrace it (as
  // the daemon by pid could, with CAP_SYS_PTRACE).
  if (::geteuid() == 0) EXPECT_TRUE(contains(out, "ELF header readable here: yes"));
  // Both operations fail with the reason, whichever way the data would have gone.
  const std::string unavailable = "status=" + std::to_string(static_cast<int>(Code::Unavailable));
  for (const char* what : {"read", "write"}) {
    const std::string line = lineAfter(out, std::string("after exec ") + what + ": ");
    EXPECT_TRUE(line.starts_with(unavailable + " ")) << what << ": " << line;
    EXPECT_TRUE(contains(line, "client memory is gone")) << what << ": " << line;
    EXPECT_TRUE(contains(line, "exited or called exec")) << what << ": " << line;
  }
  EXPECT_TRUE(contains(out, "after exec segment allreduce: ok\n"));
  EXPECT_FALSE(contains(out, "WRONG "));
  EXPECT_FALSE(contains(out, "ERROR "));
  EXPECT_TRUE(contains(out, "\n#wrong 0\n"));
  // The daemon stayed up and serves new clients.
  EXPECT_TRUE(daemon->running());
  Status serves = checkDaemonServes(daemon->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString();
  EXPECT_EQ(daemon->stop(), 0);
}

// What a client of protocol 1.3 sent: the daemon refuses the frame (Error) and closes the
// connection, rather than reaching the client by its pid.
TEST(CrossMemoryAttachExecTest, ProbeWithoutTheMemFileEndsTheConnection) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto c = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_TRUE(c->handshake().isOk());
  uint8_t pattern[ipc::kCmaPatternBytes] = {1, 2, 3};
  auto reply = c->cmaProbe(reinterpret_cast<uintptr_t>(pattern), pattern, {});
  ASSERT_FALSE(reply.isOk());
  EXPECT_EQ(reply.status().code(), Code::InvalidArgument) << reply.status().toString();
  EXPECT_TRUE(contains(reply.status().message(), "expected 1")) << reply.status().message();
  EXPECT_TRUE(c->waitClosed());
  Status serves = checkDaemonServes(daemon->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString();
  EXPECT_EQ(daemon->stop(), 0);
}

// A descriptor that is not the client's mem file, open for writing, is refused with the reason;
// the connection goes on, and a proper probe then passes.
TEST(CrossMemoryAttachExecTest, ProbeWithAnotherDescriptorIsRefusedWithTheReason) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto c = RawClient::connect(daemon->socketPath());
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_TRUE(c->handshake().isOk());
  auto* page = static_cast<uint8_t*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(page, MAP_FAILED);
  uint8_t pattern[ipc::kCmaPatternBytes];
  for (size_t i = 0; i < sizeof(pattern); ++i) page[i] = pattern[i] = uint8_t(i * 5 + 9);
  const uint64_t address = reinterpret_cast<uintptr_t>(page);
  struct Case {
    const char* path;
    int flags;
    const char* why;
  };
  for (const Case& k : {Case{"/dev/null", O_RDWR, "not a file of /proc"},
                        Case{"/proc/self/status", O_RDONLY, "not a process's mem file"},
                        Case{"/proc/self/mem", O_RDONLY, "reading and writing"}}) {
    SCOPED_TRACE(k.path);
    const int fd = ::open(k.path, k.flags | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const int fds[1] = {fd};
    auto reply = c->cmaProbe(address, pattern, fds);
    ::close(fd);
    ASSERT_TRUE(reply.isOk()) << reply.status().toString();
    EXPECT_EQ(reply->status, static_cast<int32_t>(Code::InvalidArgument));
    EXPECT_TRUE(contains(reply->message, k.why)) << reply->message;
    EXPECT_EQ(page[0], pattern[0]) << "nothing was written";
  }
  const int mem = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  const int fds[1] = {mem};
  auto reply = c->cmaProbe(address, pattern, fds);
  ::close(mem);
  ASSERT_TRUE(reply.isOk()) << reply.status().toString();
  EXPECT_EQ(reply->status, 0) << reply->message;
  EXPECT_EQ(page[0], uint8_t(~pattern[0]));
  ::munmap(page, 4096);
  EXPECT_TRUE(contains(daemon->log(), "cross-memory attach enabled")) << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0);
}

}  // namespace
}  // namespace hc::integ
