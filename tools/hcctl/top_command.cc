// hcctl top: this daemon's communicators, refreshed every --interval. On a terminal the screen is
// redrawn in place (ANSI escapes, no curses) and 'q' or Ctrl-C quits; otherwise, or with --once,
// frames are printed one after another as plain text, as `top -b` does.
//
// Every frame's rates are over the interval before it: the first frame comes one interval after
// the first sample, so that --once prints measured rates, never a blank first guess.
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "tools/hcctl/commands.h"
#include "tools/hcctl/top_sample.h"
#include "tools/hcctl/top_terminal.h"

namespace hc::hcctl {
namespace {

constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

int exitCodeOf(const Status& status) {
  return status.code() == Code::Unavailable ? kExitConnectFailed : kExitRpcFailed;
}

// The first lines of `frame` that fit `rows` (0 = all): a redraw that scrolled would push the
// header off the screen.
std::string fitRows(const std::string& frame, size_t rows) {
  if (rows == 0) return frame;
  size_t end = 0;
  for (size_t line = 0; line < rows && end < frame.size(); ++line) {
    const size_t next = frame.find('\n', end);
    end = next == std::string::npos ? frame.size() : next + 1;
  }
  std::string out = frame.substr(0, end);
  if (!out.empty() && out.back() == '\n') out.pop_back();  // the last row ends the screen
  return out;
}

// Ctrl-C is how a person leaves the live view, as 'q' is: a success. Any other signal, or one
// that stops a script's frames, exits as a shell reports a killed command.
int signalExit(int sig, bool live) { return live && sig == SIGINT ? kExitOk : 128 + sig; }

}  // namespace

int runTop(const Target& target, const TopOptions& options) {
  top::SignalEvents signals;  // first: before gRPC starts any thread
  const bool live = !options.once && ::isatty(STDOUT_FILENO) == 1;
  auto channel = connect(target);
  if (!channel) return kExitConnectFailed;
  top::ControlSampler sampler(target, channel);
  Result<top::Source> source = sampler.source();
  Result<top::Sample> before =
      source.isOk() ? sampler.sample() : Result<top::Sample>(source.status());
  if (!before.isOk()) {
    std::cerr << "hcctl: " << before.status().message() << "\n";
    return exitCodeOf(before.status());
  }
  source.value().intervalSeconds = options.intervalSeconds;
  const auto interval =
      std::chrono::milliseconds(static_cast<int64_t>(options.intervalSeconds * 1000 + 0.5));

  top::KeyboardMode keyboard(live ? STDIN_FILENO : -1, STDOUT_FILENO);
  const int keysFd = keyboard.active() ? STDIN_FILENO : -1;
  if (live) {
    std::cout << kClearScreen << "hcctl top: sampling " << target.uri() << " every "
              << options.intervalSeconds << " s; q quits" << std::flush;
  }
  const uint64_t frames = options.once ? 1 : options.iterations;
  for (uint64_t shown = 0; frames == 0 || shown < frames; ++shown) {
    const top::WaitEnd end = top::waitForInput(signals, keysFd, interval);
    if (end.kind == top::WaitEnd::Quit) break;
    if (end.kind == top::WaitEnd::Signal) return signalExit(end.signal, live);
    size_t columns = 0, rows = 0;
    if (live) top::terminalSize(STDOUT_FILENO, &columns, &rows);
    Result<top::Sample> now = sampler.sample();
    std::string frame;
    if (now.isOk()) {
      frame = top::formatFrame(source.value(), before.value(), now.value(), columns);
      before = std::move(now);
    } else if (options.once) {
      std::cerr << "hcctl: " << now.status().message() << "\n";
      return exitCodeOf(now.status());
    } else {
      // The daemon may come back (a restart): say so and keep asking.
      frame = top::formatUnavailable(source.value(), top::wallClockNs(), now.status().message(),
                                     columns);
    }
    if (live) {
      std::cout << kClearScreen << fitRows(frame, rows) << std::flush;
    } else {
      std::cout << (shown == 0 ? "" : "\n") << frame << std::flush;
    }
  }
  if (live) std::cout << "\n" << std::flush;
  return kExitOk;
}

}  // namespace hc::hcctl
