// What hcctl top needs of the terminal and of signals: keys as they are typed, a screen to redraw,
// and SIGINT/SIGTERM/SIGHUP turned into events of its wait, so that every way out goes through
// the destructors that give the terminal back as it was.
#pragma once

#include <termios.h>

#include <chrono>
#include <cstddef>

namespace hc::hcctl::top {

// Blocks SIGINT, SIGTERM and SIGHUP for the process and reads them from a signalfd instead.
// Construct it before any thread starts (before the gRPC channel): threads inherit the mask, so
// no other thread takes the signal and dies with the terminal still in raw mode. Unblocks, and
// leaves a pending signal to its default action, when destroyed.
class SignalEvents {
 public:
  SignalEvents();
  ~SignalEvents();
  SignalEvents(const SignalEvents&) = delete;
  SignalEvents& operator=(const SignalEvents&) = delete;

  int fd() const { return fd_; }
  // The signal that arrived, or 0.
  int take();

 private:
  int fd_ = -1;
  sigset_t mask_;
  sigset_t previous_;
};

// The terminal on `fd` in non-canonical mode without echo while alive (a key arrives as it is
// typed, and is not printed over the frame; Ctrl-C still raises SIGINT), with the cursor hidden
// on `screenFd`; restored on destruction. Does nothing when `fd` is not a terminal.
class KeyboardMode {
 public:
  KeyboardMode(int fd, int screenFd);
  ~KeyboardMode();
  KeyboardMode(const KeyboardMode&) = delete;
  KeyboardMode& operator=(const KeyboardMode&) = delete;

  bool active() const { return active_; }

 private:
  int fd_;
  int screenFd_;
  bool active_ = false;
  termios saved_{};
};

// How a wait ended.
struct WaitEnd {
  enum Kind { Elapsed, Quit, Signal } kind = Elapsed;
  int signal = 0;  // Signal: which
};

// Waits `timeout`, returning early for a signal or, when keysFd >= 0, for 'q' or 'Q' typed on it
// (other keys are read and ignored; end of input stops watching keysFd).
WaitEnd waitForInput(SignalEvents& signals, int keysFd, std::chrono::milliseconds timeout);

// The terminal's columns and rows on `fd`; 0, 0 when it is not a terminal.
void terminalSize(int fd, size_t* columns, size_t* rows);

}  // namespace hc::hcctl::top
