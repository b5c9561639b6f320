#include "tests/integration/daemon_process.h"

#include <dirent.h>
#include <signal.h>

#include <cstdlib>
#include <thread>

#include "common/seqpacket.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

constexpr auto kReadyTimeout = std::chrono::seconds(10);
constexpr auto kPollInterval = std::chrono::milliseconds(10);

}  // namespace

std::unique_ptr<DaemonProcess> DaemonProcess::start(const std::vector<std::string>& extraArgs,
                                                    std::string* error) {
  return start(extraArgs, Launch{}, error);
}

std::unique_ptr<DaemonProcess> DaemonProcess::start(const std::vector<std::string>& extraArgs,
                                                    const Launch& launch, std::string* error) {
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  d->dir_ = test::makeTempDir("hc-integ");
  if (d->dir_.empty()) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  // A socket in a directory that does not exist yet: the daemon creates the parent.
  d->socketPath_ = d->dir_ + "/run/hetero-commd.sock";
  // Debugging a failure: HC_INTEG_LOG_LEVEL=debug (and HC_INTEG_KEEP=1 to keep the logs).
  const char* level = std::getenv("HC_INTEG_LOG_LEVEL");
  std::vector<std::string> argv = launch.commandPrefix;
  // Flight records go to the test's directory, not the machine's /var/lib (a test moves them
  // with --set server.state_dir=..., which wins over the flag).
  argv.insert(argv.end(), {HC_DAEMON_PATH, "--socket", d->socketPath_, "--log-level",
                           level != nullptr && *level != '\0' ? level : "info", "--state-dir",
                           d->dir_ + "/state"});
  argv.insert(argv.end(), extraArgs.begin(), extraArgs.end());
  // HC_SOCKET from the test's own environment must not redirect the daemon.
  EnvVars env = launch.env;
  env.emplace_back("HC_SOCKET", d->socketPath_);
  d->process_ = ChildProcess::spawn(argv, env, d->dir_ + "/daemon.log", error);
  if (!d->process_) return nullptr;

  auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  for (;;) {
    if (connectSeqpacket(d->socketPath_).isOk()) return d;
    if (d->process_->poll()) {
      *error = "hetero-commd ended before accepting connections (" + d->process_->describeEnd() +
               "); log:\n" + d->logTail();
      return nullptr;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      *error = "hetero-commd did not accept connections at " + d->socketPath_ +
               " within 10 s; log:\n" + d->logTail();
      return nullptr;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

DaemonProcess::~DaemonProcess() {
  process_.reset();  // kills and reaps a daemon still running
  test::removeTempDir(dir_);
}

int DaemonProcess::stop(std::chrono::milliseconds timeout) {
  process_->sendSignal(SIGTERM);
  if (!process_->waitExit(timeout)) {
    process_->sendSignal(SIGKILL);
    (void)process_->waitExit(std::chrono::seconds(10));
    return -1;
  }
  return process_->exitCode();
}

void DaemonProcess::kill9() {
  process_->sendSignal(SIGKILL);
  (void)process_->waitExit(std::chrono::seconds(10));
}

int DaemonProcess::fdCount() const {
  std::string path = "/proc/" + std::to_string(process_->pid()) + "/fd";
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

int DaemonProcess::settledFdCount() const {
  constexpr auto kQuiet = std::chrono::milliseconds(300);
  int n = fdCount();
  auto stableSince = std::chrono::steady_clock::now();
  auto deadline = stableSince + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() - stableSince < kQuiet &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPollInterval);
    int m = fdCount();
    if (m != n) {
      n = m;
      stableSince = std::chrono::steady_clock::now();
    }
  }
  return n;
}

int DaemonProcess::waitForFdCount(int target, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int n = fdCount();
  while (n > target && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPollInterval);
    n = fdCount();
  }
  return n;
}

std::string DaemonProcess::logTail(size_t lines) const {
  std::string text = log();
  size_t start = text.size();
  for (size_t seen = 0; start > 0; --start) {
    if (text[start - 1] == '\n' && start != text.size() && ++seen == lines) break;
  }
  return text.substr(start);
}

}  // namespace hc::integ
