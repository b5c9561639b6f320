// hcctl top's live view under a pseudo-terminal: it redraws (clear-screen escapes, one frame per
// --interval), takes the terminal out of canonical mode and echo while it runs, and on 'q',
// Ctrl-C or SIGTERM exits promptly with the terminal as it found it.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

#include <cerrno>
#include <cstring>

#include "tests/integration/hcctl_run.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool sameMode(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
         a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0;
}

// hcctl on the slave side of a fresh pseudo-terminal, as its controlling terminal (Ctrl-C typed
// into the master raises SIGINT in it). The test keeps the slave open too, to read its mode.
class PtyHcctl {
 public:
  ~PtyHcctl() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
    if (slave_ >= 0) ::close(slave_);
  }

  // A 160x40 terminal; false when none can be made.
  bool open() {
    winsize size{};
    size.ws_row = 40;
    size.ws_col = 160;
    return ::openpty(&master_, &slave_, nullptr, nullptr, &size) == 0;
  }

  // Runs hcctl `args` on the terminal open() made.
  bool start(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {HC_HCCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const int slave = ::dup(slave_);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(master_);
      if (::login_tty(slave) != 0) ::_exit(126);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(slave);
    return pid_ > 0;
  }

  // The terminal's current mode, as the program set it.
  termios mode() const {
    termios t{};
    ::tcgetattr(slave_, &t);
    return t;
  }

  void type(const std::string& keys) {
    EXPECT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  void signal(int sig) { ::kill(pid_, sig); }

  // Reads what it printed until `done(output)` or the deadline.
  template <class Done>
  bool readUntil(Done done, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!done(output_)) {
      if (Clock::now() > deadline) return false;
      drain(milliseconds(50));
    }
    return true;
  }

  // Waits for it to exit, reading its output meanwhile (a full terminal would block it); its
  // exit status, -1 at the deadline, 1000 + N when signal N killed it.
  int waitExit(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        drain(milliseconds(0));
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
      }
      drain(milliseconds(20));
    }
    return -1;
  }

  const std::string& output() const { return output_; }

 private:
  void drain(milliseconds wait) {
    pollfd fd{master_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(wait.count())) <= 0) return;
    char buffer[4096];
    const ssize_t n = ::read(master_, buffer, sizeof buffer);
    if (n > 0) output_.append(buffer, static_cast<size_t>(n));
  }

  int master_ = -1;
  int slave_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
};

struct Ending {
  const char* name;
  std::string keys;  // typed into the terminal
  int signal;        // or sent
  int exitCode;
};

void PrintTo(const Ending& ending, std::ostream* out) { *out << ending.name; }

class HcctlTopPtyTest : public ::testing::TestWithParam<Ending> {};

TEST_P(HcctlTopPtyTest, RedrawsThenRestoresTheTerminalOnExit) {
  auto d = startServingDaemon({});
  ASSERT_NE(d, nullptr);
  PtyHcctl top;
  ASSERT_TRUE(top.open()) << std::strerror(errno);
  const termios before = top.mode();
  ASSERT_NE(before.c_lflag & ICANON, 0u) << "a fresh terminal is canonical";
  ASSERT_TRUE(top.start(
      {"--socket", d->dir() + "/run/hetero-commd-admin.sock", "top", "--interval", "0.2"}));
  // The first screen says what it samples; then a frame per interval, each on a cleared screen.
  ASSERT_TRUE(top.readUntil(
      [](const std::string& out) { return occurrences(out, "hcctl top - ") >= 2; }, seconds(20)))
      << top.output();
  EXPECT_GE(occurrences(top.output(), kClearScreen), 3u) << top.output();
  EXPECT_NE(top.output().find("(no communicators)"), std::string::npos) << top.output();
  const termios running = top.mode();
  EXPECT_EQ(running.c_lflag & (ICANON | ECHO), 0u) << "keys arrive as typed, unechoed";
  EXPECT_NE(running.c_lflag & ISIG, 0u) << "Ctrl-C still interrupts";

  const Ending& ending = GetParam();
  const auto asked = Clock::now();
  if (!ending.keys.empty()) top.type(ending.keys);
  if (ending.signal != 0) top.signal(ending.signal);
  EXPECT_EQ(top.waitExit(seconds(5)), ending.exitCode) << top.output();
  EXPECT_LT(Clock::now() - asked, seconds(5));
  EXPECT_TRUE(sameMode(top.mode(), before)) << "the terminal mode was not restored";
  EXPECT_NE(top.output().rfind("\x1b[?25h"), std::string::npos) << "cursor shown again";
}

INSTANTIATE_TEST_SUITE_P(QuitKeysAndSignals, HcctlTopPtyTest,
                         ::testing::Values(Ending{"Q", "q", 0, 0}, Ending{"CtrlC", "\x03", 0, 0},
                                           Ending{"Sigterm", "", SIGTERM, 128 + SIGTERM}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hc::integ
