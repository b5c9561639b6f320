// Who serves the socket: a real client process (hc_rank_worker --probe, libhcclient) refuses a
// server of another uid, and a server in a folder others can write, before it sends a byte, and
// still reaches a real daemon; hetero-commd refuses to bind in a folder of another uid or one
// others can write, and binds its sockets born 0660. Cases that give files or processes to
// another uid (nobody, 65534) need root and skip without it.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/socket_trust.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

constexpr uid_t kNobody = 65534;
constexpr auto kExitTimeout = std::chrono::seconds(20);

// What the fake server saw, as its exit code.
enum FakeOutcome : int {
  kClosedUnused = 0,  // the client connected and closed without sending anything
  kGotBytes = 3,      // the client sent something: it trusted the server
  kNoConnection = 4,  // nobody connected in time
  kSetupFailed = 5,
};

// A server at `path` that only listens, run by a forked child as `uid` (after setresuid, when it
// is not ours): it accepts one connection and reports, as its exit code, whether the client sent
// anything before closing. The child dies with the test (PR_SET_PDEATHSIG) and is reaped here.
class FakeServer {
 public:
  FakeServer(const std::string& path, uid_t uid) {
    int ready[2];
    HC_CHECK(::pipe2(ready, O_CLOEXEC) == 0);
    pid_ = ::fork();
    HC_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      ::close(ready[0]);
      ::_exit(serve(path, uid, ready[1]));
    }
    ::close(ready[1]);
    char byte = 0;
    ready_ = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
  }
  ~FakeServer() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  bool ready() const { return ready_; }
  // The child's FakeOutcome, or -1 when it was killed.
  int outcome() {
    int status = 0;
    HC_CHECK(::waitpid(pid_, &status, 0) == pid_);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  // Runs in the forked child: system calls only.
  static int serve(const std::string& path, uid_t uid, int readyFd) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (uid != ::geteuid()) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
          ::setresuid(uid, uid, uid) != 0) {
        return kSetupFailed;
      }
    }
    ::umask(0);  // anyone may connect: the client's check, not the file mode, must refuse
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd, 4) != 0) {
      return kSetupFailed;
    }
    const char byte = 1;
    if (::write(readyFd, &byte, 1) != 1) return kSetupFailed;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 15000) != 1) return kNoConnection;
    const int conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return kNoConnection;
    char frame[4096];
    pollfd c{conn, POLLIN, 0};
    if (::poll(&c, 1, 15000) != 1) return kNoConnection;
    return ::recv(conn, frame, sizeof(frame), 0) > 0 ? kGotBytes : kClosedUnused;
  }

  pid_t pid_ = -1;
  bool ready_ = false;
  bool reaped_ = false;
};

// hc_rank_worker --probe against `socket`: connects, allocates, frees. Returns its output and sets
// *exitCode.
std::string probe(const std::string& socket, const std::string& dir, int* exitCode) {
  std::string error;
  auto p = ChildProcess::spawn({HC_RANK_WORKER_PATH, "--probe"}, {{"HC_SOCKET", socket}},
                               dir + "/probe.log", &error);
  if (!p) {
    *exitCode = -2;
    return error;
  }
  *exitCode = p->waitExit(kExitTimeout) ? p->exitCode() : -1;
  return p->output();
}

// A folder under dir with the given owner and mode (chmod: mkdir's mode passes the umask).
std::string makeFolder(const std::string& dir, const std::string& name, uid_t owner, mode_t mode) {
  const std::string path = dir + "/" + name;
  HC_CHECK(::mkdir(path.c_str(), 0700) == 0);
  HC_CHECK(owner == ::geteuid() || ::chown(path.c_str(), owner, owner) == 0);
  HC_CHECK(::chmod(path.c_str(), mode) == 0);
  return path;
}

TEST(ServerTrustTest, AClientRefusesADaemonServedByAnotherUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "serving as another uid (setresuid) needs root";
  test::TempDir dir("hc-trust");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);  // nobody may pass through to its folder
  // The attack: another user owns a folder at the path clients use and serves a socket there.
  const std::string theirs = makeFolder(dir.path(), "theirs", kNobody, 0755);
  const std::string socket = theirs + "/hetero-commd.sock";
  FakeServer server(socket, kNobody);
  ASSERT_TRUE(server.ready()) << "the fake server did not start (outcome " << server.outcome()
                              << ")";

  int exitCode = 0;
  const std::string output = probe(socket, dir.path(), &exitCode);
  EXPECT_EQ(exitCode, 1) << output;
  const std::string expected = "refusing the daemon at " + socket + ": served by uid 65534, " +
                               "expected " + TrustedUsers::ofThisProcess().describe();
  EXPECT_NE(output.find(expected), std::string::npos) << "expected: " << expected << "\n" << output;
  EXPECT_NE(output.find("permission denied"), std::string::npos) << output;
  EXPECT_EQ(server.outcome(), kClosedUnused) << "the client sent something to the impostor";
}

// A server of a trusted uid (this process's own) in a folder everyone may write: someone else
// could have put it there, and nothing tells a squatter from the real daemon.
TEST(ServerTrustTest, AClientRefusesADaemonInAFolderOthersCanWrite) {
  test::TempDir dir("hc-trust");
  const std::string shared = makeFolder(dir.path(), "shared", ::geteuid(), 01777);
  const std::string socket = shared + "/hetero-commd.sock";
  FakeServer server(socket, ::geteuid());
  ASSERT_TRUE(server.ready()) << "the fake server did not start (outcome " << server.outcome()
                              << ")";

  int exitCode = 0;
  const std::string output = probe(socket, dir.path(), &exitCode);
  EXPECT_EQ(exitCode, 1) << output;
  const std::string expected = "refusing the daemon at " + socket + ": its folder " + shared +
                               " is writable by others (mode 1777)";
  EXPECT_NE(output.find(expected), std::string::npos) << "expected: " << expected << "\n" << output;
  EXPECT_EQ(server.outcome(), kClosedUnused) << "the client sent something before refusing";
}

// The same client binary, against a real daemon: the check lets it through, and the daemon's
// sockets and the folder it created have the modes it promises.
TEST(ServerTrustTest, TheClientConnectsToARealDaemonWhoseSocketsAreBorn0660) {
  std::string error;
  auto d = DaemonProcess::start({}, &error);
  ASSERT_NE(d, nullptr) << error;
  int exitCode = 0;
  const std::string output = probe(d->socketPath(), d->dir(), &exitCode);
  EXPECT_EQ(exitCode, 0) << output;

  struct stat st {};
  ASSERT_EQ(::stat(d->socketPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u) << "client socket";
  ASSERT_EQ(::stat(parentFolder(d->socketPath()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "the folder the daemon created";
  const std::string admin = d->dir() + "/run/hetero-commd-admin.sock";
  ASSERT_TRUE(d->process().waitForOutput("control listening on unix:", std::chrono::seconds(10)))
      << d->logTail();
  ASSERT_EQ(::stat(admin.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u) << "admin socket";
}

// hetero-commd --socket <folder>/hetero-commd.sock; returns its exit code and output.
std::string runDaemon(const std::string& dir, const std::string& socket, int* exitCode) {
  std::string error;
  auto p = ChildProcess::spawn(
      {HC_DAEMON_PATH, "--socket", socket, "--state-dir", dir + "/state", "--log-level", "info"},
      {{"HC_SOCKET", socket}}, dir + "/daemon.log", &error);
  if (!p) {
    *exitCode = -2;
    return error;
  }
  *exitCode = p->waitExit(kExitTimeout) ? p->exitCode() : -1;
  return p->output();
}

TEST(ServerTrustTest, TheDaemonRefusesAFolderOfAnotherUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a folder to another uid needs root";
  test::TempDir dir("hc-trust");
  const std::string theirs = makeFolder(dir.path(), "theirs", kNobody, 0755);
  const std::string socket = theirs + "/hetero-commd.sock";
  int exitCode = 0;
  const std::string output = runDaemon(dir.path(), socket, &exitCode);
  EXPECT_NE(exitCode, 0) << output;
  EXPECT_NE(exitCode, -1) << "still running: " << output;
  EXPECT_NE(output.find("refusing to serve " + socket + ": its folder " + theirs +
                        " is owned by uid 65534"),
            std::string::npos)
      << output;
  EXPECT_NE(::access(socket.c_str(), F_OK), 0) << "nothing may be bound there";
}

TEST(ServerTrustTest, TheDaemonRefusesAFolderOthersCanWrite) {
  test::TempDir dir("hc-trust");
  const std::string shared = makeFolder(dir.path(), "shared", ::geteuid(), 01777);
  const std::string socket = shared + "/hetero-commd.sock";
  int exitCode = 0;
  const std::string output = runDaemon(dir.path(), socket, &exitCode);
  EXPECT_NE(exitCode, 0) << output;
  EXPECT_NE(exitCode, -1) << "still running: " << output;
  EXPECT_NE(output.find("refusing to serve " + socket + ": its folder " + shared +
                        " is writable by others (mode 1777)"),
            std::string::npos)
      << output;
  EXPECT_NE(::access(socket.c_str(), F_OK), 0) << "nothing may be bound there";
}

}  // namespace
}  // namespace hc::integ
