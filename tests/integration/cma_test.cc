// Cross-memory attach end to end: real daemons and hc_cma_worker processes whose buffers are all
// plain heap memory. The fast path when both sides opt in, also with a daemon that holds no
// capability and clients that are not dumpable; the fallback to segment staging, with its
// reason, when the daemon's setting is off, when the client does not ask, when the daemon does
// not know the probe and when it predates the probe's descriptor; and a forked child that must
// probe for itself. Every job checks its results whichever path it took. The exec case and
// hand-made probes are in cma_exec_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"
#include "common/unique_fd.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

constexpr auto kJobTimeout = std::chrono::seconds(120);
constexpr const char* kAttached = "cross-memory attach";
constexpr const char* kDaemonAttachedLog = "cross-memory attach enabled";
constexpr const char* kDaemonRefusedLog = "cross-memory attach not available";

// The ranks of one job of hc_cma_worker processes.
using Ranks = std::vector<std::unique_ptr<ChildProcess>>;

// Starts nranks workers against the daemon at socketPath, with HC_CROSS_MEMORY_ATTACH=attachEnv.
Ranks startRanks(const std::string& socketPath, const std::string& dir, const std::string& name,
                 int nranks, const std::string& attachEnv, const std::vector<std::string>& args,
                 std::string* error) {
  const std::string id = uniqueIdHex(socketPath, dir, error);
  if (id.empty()) return {};
  Ranks ranks;
  for (int r = 0; r < nranks; ++r) {
    std::vector<std::string> argv = {HC_CMA_WORKER_PATH,
                                     "--rank",
                                     std::to_string(r),
                                     "--nranks",
                                     std::to_string(nranks),
                                     "--id",
                                     id};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::spawn(
        argv, {{"HC_SOCKET", socketPath}, {"HC_CROSS_MEMORY_ATTACH", attachEnv}},
        dir + "/" + name + "-rank" + std::to_string(r) + ".log", error);
    if (!child) return {};
    ranks.push_back(std::move(child));
  }
  return ranks;
}

// Waits for every rank, then expects each to have exited 0 with "#wrong 0" and no WRONG or
// ERROR line; attaches every rank's output and the daemon's log on failure.
void expectRanksSucceed(Ranks& ranks, const std::string& daemonLogTail) {
  const auto deadline = std::chrono::steady_clock::now() + kJobTimeout;
  std::string report;
  for (size_t r = 0; r < ranks.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    EXPECT_TRUE(ranks[r]->waitExit(std::max(left, std::chrono::milliseconds(0))));
    const std::string out = ranks[r]->output();
    EXPECT_EQ(ranks[r]->exitCode(), 0);
    EXPECT_NE(out.find("\n#wrong 0\n"), std::string::npos);
    EXPECT_EQ(out.find("WRONG "), std::string::npos);
    EXPECT_EQ(out.find("ERROR "), std::string::npos);
    report += "--- rank " + std::to_string(r) + " (" + ranks[r]->describeEnd() + "):\n" + out;
  }
  if (::testing::Test::HasFailure()) {
    ADD_FAILURE() << report << "--- daemon log tail:\n" << daemonLogTail;
  }
}

// What a worker printed after "<prefix>memory-path: " at the start of a line.
std::string memoryPathOf(const std::string& output, const std::string& prefix = "") {
  const std::string key = prefix + "memory-path: ";
  for (size_t pos = output.find(key); pos != std::string::npos; pos = output.find(key, pos + 1)) {
    if (pos != 0 && output[pos - 1] != '\n') continue;
    const size_t begin = pos + key.size();
    return output.substr(begin, output.find('\n', begin) - begin);
  }
  return "(no memory-path line)";
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// hetero-commd started through the worker's launcher without any capability, as the shipped
// systemd unit runs it (CapabilityBoundingSet= empty). Without CAP_SYS_PTRACE the kernel would
// refuse it ptrace access to a non-dumpable client, even when both run as root; cross-memory
// attach needs none, since the client hands over its own /proc/self/mem.
class DaemonWithoutCapabilities {
 public:
  static std::unique_ptr<DaemonWithoutCapabilities> start(std::string* error) {
    std::unique_ptr<DaemonWithoutCapabilities> d(new DaemonWithoutCapabilities());
    const std::string dir = test::makeTempDir("hc-cma");
    if (dir.empty()) {
      *error = "mkdtemp failed";
      return nullptr;
    }
    d->dir_ = dir;
    d->socketPath_ = dir + "/hetero-commd.sock";
    d->process_ = ChildProcess::spawn(
        {HC_CMA_WORKER_PATH, "--exec-without-capabilities", HC_DAEMON_PATH, "--socket",
         d->socketPath_, "--log-level", "info", "--cross-memory-attach", "true"},
        {{"HC_SOCKET", d->socketPath_}}, dir + "/daemon.log", error);
    if (!d->process_) return nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!connectSeqpacket(d->socketPath_).isOk()) {
      if (d->process_->poll() || std::chrono::steady_clock::now() >= deadline) {
        *error = "hetero-commd without capabilities did not start (" +
                 d->process_->describeEnd() + "); log:\n" + d->process_->output();
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return d;
  }
  ~DaemonWithoutCapabilities() {
    process_.reset();  // kills and reaps a daemon still running
    test::removeTempDir(dir_);
  }

  // The running daemon's effective and bounding capability sets (CapEff, CapBnd); all bits set
  // when /proc does not say.
  unsigned long long capabilities(const char* field) const {
    const std::string status = readFile("/proc/" + std::to_string(process_->pid()) + "/status");
    const size_t at = status.find(field);
    if (at == std::string::npos) return ~0ull;
    return std::strtoull(status.c_str() + at + std::strlen(field), nullptr, 16);
  }
  int stop() {
    process_->sendSignal(SIGTERM);
    if (!process_->waitExit(std::chrono::seconds(10))) return -1;
    return process_->exitCode();
  }
  const std::string& socketPath() const { return socketPath_; }
  const std::string& dir() const { return dir_; }
  std::string log() const { return process_->output(); }

 private:
  DaemonWithoutCapabilities() = default;

  std::string dir_;
  std::string socketPath_;
  std::unique_ptr<ChildProcess> process_;
};

class CrossMemoryAttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Each test sets the daemon's choice by flag and the client's by environment, explicitly:
    // the test's own environment must not decide either.
    ::unsetenv("HC_SESSION_CROSS_MEMORY_ATTACH");
    ::unsetenv("HC_CROSS_MEMORY_ATTACH");
  }
};

TEST_F(CrossMemoryAttachTest, HeapMemoryGoesByAddressWhenDaemonAndClientOptIn) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  Ranks ranks = startRanks(daemon->socketPath(), daemon->dir(), "attach", 2, "1", {}, &error);
  ASSERT_EQ(ranks.size(), 2u) << error;
  expectRanksSucceed(ranks, daemon->logTail());
  for (auto& rank : ranks) EXPECT_EQ(memoryPathOf(rank->output()), kAttached);
  EXPECT_EQ(occurrences(daemon->log(), kDaemonAttachedLog), 2u) << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

TEST_F(CrossMemoryAttachTest, DaemonWithoutTheSettingStagesAndNamesIt) {
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);  // session.cross_memory_attach: default off
  ASSERT_NE(daemon, nullptr) << error;
  Ranks ranks = startRanks(daemon->socketPath(), daemon->dir(), "off", 2, "1", {}, &error);
  ASSERT_EQ(ranks.size(), 2u) << error;
  expectRanksSucceed(ranks, daemon->logTail());
  for (auto& rank : ranks) {
    const std::string path = memoryPathOf(rank->output());
    EXPECT_TRUE(path.starts_with("segment staging (")) << path;
    EXPECT_TRUE(contains(path, "off in the daemon's configuration")) << path;
    EXPECT_TRUE(contains(path, "session.cross_memory_attach")) << path;
  }
  EXPECT_EQ(occurrences(daemon->log(), kDaemonAttachedLog), 0u);
  EXPECT_EQ(occurrences(daemon->log(), kDaemonRefusedLog), 2u) << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// The attach takes no ptrace rights: a daemon without any capability attaches clients that
// nobody but CAP_SYS_PTRACE could ptrace (not dumpable), where process_vm_readv was refused.
TEST_F(CrossMemoryAttachTest, DaemonWithoutCapabilitiesAttachesEvenNonDumpableClients) {
  std::string error;
  auto daemon = DaemonWithoutCapabilities::start(&error);
  ASSERT_NE(daemon, nullptr) << error;
  if (daemon->capabilities("CapEff:") != 0 || daemon->capabilities("CapBnd:") != 0) {
    GTEST_SKIP() << "could not start hetero-commd without capabilities (needs CAP_SETPCAP)";
  }
  Ranks ranks = startRanks(daemon->socketPath(), daemon->dir(), "nocaps", 2, "1",
                           {"--drop-dumpable"}, &error);
  ASSERT_EQ(ranks.size(), 2u) << error;
  expectRanksSucceed(ranks, daemon->log());
  for (auto& rank : ranks) EXPECT_EQ(memoryPathOf(rank->output()), kAttached);
  EXPECT_EQ(occurrences(daemon->log(), kDaemonAttachedLog), 2u) << daemon->log();
  EXPECT_EQ(occurrences(daemon->log(), kDaemonRefusedLog), 0u) << daemon->log();
  EXPECT_EQ(daemon->stop(), 0) << daemon->log();
}

TEST_F(CrossMemoryAttachTest, ClientThatDoesNotAskStagesWithoutProbing) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  Ranks ranks = startRanks(daemon->socketPath(), daemon->dir(), "unasked", 2, "0", {}, &error);
  ASSERT_EQ(ranks.size(), 2u) << error;
  expectRanksSucceed(ranks, daemon->logTail());
  for (auto& rank : ranks) {
    const std::string path = memoryPathOf(rank->output());
    EXPECT_TRUE(path.starts_with("segment staging (")) << path;
    EXPECT_TRUE(contains(path, "HC_CROSS_MEMORY_ATTACH=1")) << path;
  }
  // The daemon logs the outcome of every probe; there was none.
  EXPECT_EQ(occurrences(daemon->log(), kDaemonAttachedLog), 0u) << daemon->logTail();
  EXPECT_EQ(occurrences(daemon->log(), kDaemonRefusedLog), 0u) << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

TEST_F(CrossMemoryAttachTest, ForkedChildProbesForItselfAndLeavesTheParentsMemoryAlone) {
  std::string error;
  auto daemon = DaemonProcess::start({"--cross-memory-attach", "true"}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  Ranks ranks =
      startRanks(daemon->socketPath(), daemon->dir(), "fork", 2, "1", {"--fork-check"}, &error);
  ASSERT_EQ(ranks.size(), 2u) << error;
  expectRanksSucceed(ranks, daemon->logTail());
  const std::string out = ranks[0]->output();
  EXPECT_TRUE(contains(out, "\nchild #wrong 0\n")) << out;
  EXPECT_EQ(memoryPathOf(out), kAttached);
  EXPECT_EQ(memoryPathOf(out, "child "), kAttached);
  // Both ranks and the child, each probed on its own connection.
  EXPECT_EQ(occurrences(daemon->log(), kDaemonAttachedLog), 3u) << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

// A daemon that predates the probe, as far as the client can tell: it welcomes announcing
// `minor`, answers CmaProbe with Error and closes the connection, as hetero-commd does with a
// frame it does not know. Serves `connections` connections on a thread, each until the client
// closes it, and records the frames of each. Gives up on a client that has not connected within
// 30 s.
class DaemonWithoutProbe {
 public:
  explicit DaemonWithoutProbe(std::string socketPath, uint16_t minor = ipc::kProtocolMinor,
                              int connections = 2)
      : socketPath_(std::move(socketPath)), minor_(minor), connections_(connections) {
    listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socketPath_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    listening_ = listener_.valid() &&
                 ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                 ::listen(listener_.get(), 4) == 0;
    if (listening_) thread_ = std::thread([this] { serve(); });
  }
  ~DaemonWithoutProbe() {
    if (thread_.joinable()) thread_.join();
  }
  bool listening() const { return listening_; }
  // After the client exited: the frames each connection sent, by type.
  std::vector<std::vector<uint16_t>> framesByConnection() {
    if (thread_.joinable()) thread_.join();
    return frames_;
  }

 private:
  void serve() {
    for (int connection = 0; connection < connections_; ++connection) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 30'000) != 1) return;
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!client.valid()) return;
      frames_.emplace_back();
      for (;;) {
        auto msg = receiveMessage(client.get(), ipc::kMaxFrameBytes, true);
        if (!msg.isOk()) break;  // the client closed the connection
        const auto header = ipc::frameAs<ipc::FrameHeader>(msg->bytes);
        frames_.back().push_back(header.type);
        if (header.type == static_cast<uint16_t>(ipc::FrameType::Hello)) {
          welcome(client.get(), header.requestId);
          continue;
        }
        auto error = ipc::makeErrorFrame(
            0, invalidArgument("frame type " + std::to_string(header.type) + " is not a request"));
        (void)sendMessage(client.get(), ipc::frameBytes(error));
        break;
      }
    }
  }

  void welcome(int client, uint32_t requestId) {
    constexpr uint32_t kEntries = 16;
    const ipc::SegmentLayout l = ipc::segmentLayout(0, kEntries);
    const uint64_t bytes = l.heapOffset + (1u << 20);
    UniqueFd segment(::memfd_create("fake-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    UniqueFd event(::eventfd(0, EFD_CLOEXEC));
    if (!segment.valid() || !event.valid() || ::ftruncate(segment.get(), bytes) != 0) return;
    // Sealed as hetero-commd seals its segments: the client refuses one that could shrink.
    if (::fcntl(segment.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return;
    ipc::SegmentHeader header{};  // atomics zeroed: empty rings
    header.magic = ipc::kSegmentMagic;
    header.major = ipc::kProtocolMajor;
    header.minor = minor_;
    header.segmentBytes = bytes;
    header.ringEntries = kEntries;
    if (::pwrite(segment.get(), &header, sizeof(header), 0) != sizeof(header)) return;
    auto w = ipc::makeFrame<ipc::WelcomeFrame>(ipc::FrameType::Welcome, requestId);
    w.minor = minor_;
    w.clientId = 1;
    w.segmentBytes = bytes;
    w.ringEntries = kEntries;
    w.daemonPid = static_cast<uint32_t>(::getpid());
    const ipc::SegmentLayout full = ipc::segmentLayout(bytes, kEntries);
    w.submitOffset = full.submitOffset;
    w.completionOffset = full.completionOffset;
    w.heapOffset = full.heapOffset;
    w.heapBytes = full.heapBytes;
    const int fds[2] = {segment.get(), event.get()};
    (void)sendMessage(client, ipc::frameBytes(w), fds);
  }

  std::string socketPath_;
  uint16_t minor_;
  int connections_;
  UniqueFd listener_;
  bool listening_ = false;
  std::thread thread_;
  std::vector<std::vector<uint16_t>> frames_;
};

TEST_F(CrossMemoryAttachTest, DaemonThatDoesNotKnowTheProbeGetsAFreshConnectionWithoutIt) {
  const std::string dir = test::makeTempDir("hc-cma-old");
  ASSERT_FALSE(dir.empty());
  std::string error;
  std::vector<std::vector<uint16_t>> frames;
  std::string out;
  {
    DaemonWithoutProbe daemon(dir + "/old.sock");
    ASSERT_TRUE(daemon.listening());
    auto worker =
        ChildProcess::spawn({HC_CMA_WORKER_PATH, "--path-only"},
                            {{"HC_SOCKET", dir + "/old.sock"}, {"HC_CROSS_MEMORY_ATTACH", "1"}},
                            dir + "/worker.log", &error);
    ASSERT_NE(worker, nullptr) << error;
    EXPECT_TRUE(worker->waitExit(std::chrono::seconds(30)));
    out = worker->output();
    EXPECT_EQ(worker->exitCode(), 0) << out;
    frames = daemon.framesByConnection();
  }
  test::removeTempDir(dir);
  const std::string path = memoryPathOf(out);
  EXPECT_TRUE(path.starts_with("segment staging (")) << path;
  EXPECT_TRUE(contains(path, "does not support it")) << path;
  // Hello and the probe on the first connection; only Hello on the one the client kept.
  const uint16_t hello = static_cast<uint16_t>(ipc::FrameType::Hello);
  const uint16_t probe = static_cast<uint16_t>(ipc::FrameType::CmaProbe);
  ASSERT_EQ(frames.size(), 2u) << out;
  EXPECT_EQ(frames[0], (std::vector<uint16_t>{hello, probe}));
  EXPECT_EQ(frames[1], (std::vector<uint16_t>{hello}));
}

// A daemon of protocol 1.3 would read the client by pid (process_vm_readv), which an exec in the
// client redirects: a client of 1.4 does not ask it, says why, and keeps its one connection.
TEST_F(CrossMemoryAttachTest, DaemonBeforeTheDescriptorProbeIsNotAsked) {
  const std::string dir = test::makeTempDir("hc-cma-1.3");
  ASSERT_FALSE(dir.empty());
  std::string error;
  std::vector<std::vector<uint16_t>> frames;
  std::string out;
  {
    DaemonWithoutProbe daemon(dir + "/old.sock", ipc::kCmaProbeFdMinor - 1, 1);
    ASSERT_TRUE(daemon.listening());
    auto worker =
        ChildProcess::spawn({HC_CMA_WORKER_PATH, "--path-only"},
                            {{"HC_SOCKET", dir + "/old.sock"}, {"HC_CROSS_MEMORY_ATTACH", "1"}},
                            dir + "/worker.log", &error);
    ASSERT_NE(worker, nullptr) << error;
    EXPECT_TRUE(worker->waitExit(std::chrono::seconds(30)));
    out = worker->output();
    EXPECT_EQ(worker->exitCode(), 0) << out;
    frames = daemon.framesByConnection();
  }
  test::removeTempDir(dir);
  const std::string path = memoryPathOf(out);
  EXPECT_TRUE(path.starts_with("segment staging (")) << path;
  EXPECT_TRUE(contains(path, "protocol 1.3")) << path;
  EXPECT_TRUE(contains(path, "update the daemon")) << path;
  ASSERT_EQ(frames.size(), 1u) << out;
  EXPECT_EQ(frames[0], (std::vector<uint16_t>{static_cast<uint16_t>(ipc::FrameType::Hello)}));
}

}  // namespace
}  // namespace hc::integ
