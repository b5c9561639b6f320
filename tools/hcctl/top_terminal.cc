#include "tools/hcctl/top_terminal.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace hc::hcctl::top {
namespace {

constexpr char kHideCursor[] = "\x1b[?25l";
constexpr char kShowCursor[] = "\x1b[?25h";

void writeAll(int fd, const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

SignalEvents::SignalEvents() {
  sigemptyset(&mask_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask_, sig);
  pthread_sigmask(SIG_BLOCK, &mask_, &previous_);
  fd_ = ::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK);
}

SignalEvents::~SignalEvents() {
  if (fd_ >= 0) ::close(fd_);
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

int SignalEvents::take() {
  signalfd_siginfo info{};
  if (fd_ < 0 || ::read(fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  return static_cast<int>(info.ssi_signo);
}

KeyboardMode::KeyboardMode(int fd, int screenFd) : fd_(fd), screenFd_(screenFd) {
  if (!::isatty(fd_) || ::tcgetattr(fd_, &saved_) != 0) return;
  termios raw = saved_;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(fd_, TCSANOW, &raw) != 0) return;
  active_ = true;
  writeAll(screenFd_, kHideCursor, sizeof kHideCursor - 1);
}

KeyboardMode::~KeyboardMode() {
  if (!active_) return;
  writeAll(screenFd_, kShowCursor, sizeof kShowCursor - 1);
  // TCSAFLUSH: keys typed after the last read (a second 'q') do not land in the shell.
  (void)::tcsetattr(fd_, TCSAFLUSH, &saved_);
}

WaitEnd waitForInput(SignalEvents& signals, int keysFd, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return {};
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {keysFd, POLLIN, 0}};
    const int n = ::poll(fds, keysFd >= 0 ? 2 : 1, static_cast<int>(left));
    if (n < 0 && errno != EINTR) return {};
    if (n <= 0) continue;
    if ((fds[0].revents & POLLIN) != 0) {
      if (const int sig = signals.take(); sig != 0) return {WaitEnd::Signal, sig};
    }
    if (keysFd < 0 || fds[1].revents == 0) continue;
    char keys[64];
    const ssize_t got = ::read(keysFd, keys, sizeof keys);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      keysFd = -1;  // end of input, or an error: only signals and the clock end the wait now
      continue;
    }
    for (ssize_t i = 0; i < got; ++i) {
      if (keys[i] == 'q' || keys[i] == 'Q') return {WaitEnd::Quit, 0};
    }
  }
}

void terminalSize(int fd, size_t* columns, size_t* rows) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0) size = winsize{};
  *columns = size.ws_col;
  *rows = size.ws_row;
}

}  // namespace hc::hcctl::top
