// DaemonProcess: one hetero-commd for one test, in a fresh runtime directory with its own socket,
// so tests can run in parallel and never touch a system daemon.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"

namespace hc::integ {

class DaemonProcess {
 public:
  // Starts the daemon (extra flags appended) and waits until its socket accepts connections (at
  // most 10 s). Returns null with *error, which includes the daemon's log, on failure.
  static std::unique_ptr<DaemonProcess> start(const std::vector<std::string>& extraArgs,
                                              std::string* error);
  // How start() runs the daemon beyond its flags: extra environment (e.g. UCX_TLS), and a command
  // that runs it (e.g. {"/usr/sbin/ip", "netns", "exec", "ns0"}), which must exec the daemon in
  // its own place so that pid() stays the daemon's.
  struct Launch {
    EnvVars env;
    std::vector<std::string> commandPrefix;
  };
  static std::unique_ptr<DaemonProcess> start(const std::vector<std::string>& extraArgs,
                                              const Launch& launch, std::string* error);
  // Kills a daemon still running and removes the runtime directory (kept when HC_INTEG_KEEP is
  // set, for debugging).
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  pid_t pid() const { return process_->pid(); }
  const std::string& socketPath() const { return socketPath_; }
  const std::string& dir() const { return dir_; }
  // The environment a client needs to reach this daemon.
  EnvVars clientEnv() const { return {{"HC_SOCKET", socketPath_}}; }

  // SIGTERM, then waits up to timeout. Returns the exit code; -1 when the daemon was killed by a
  // signal or still ran at the deadline (then it is killed).
  int stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void kill9();
  bool running() { return !process_->poll(); }
  ChildProcess& process() { return *process_; }

  // Entries of /proc/<pid>/fd; -1 when unreadable.
  int fdCount() const;
  // fdCount() once it has not changed for 300 ms: the daemon may still be closing a connection
  // (such as the readiness probe's) when the test looks.
  int settledFdCount() const;
  // Polls fdCount() until it is at most target; returns the last count seen.
  int waitForFdCount(int target, std::chrono::milliseconds timeout) const;
  std::string log() const { return process_->output(); }
  // The last lines of the log, to attach to a failure.
  std::string logTail(size_t lines = 40) const;

 private:
  DaemonProcess() = default;

  std::string dir_;
  std::string socketPath_;
  std::unique_ptr<ChildProcess> process_;
};

// The port of a log line "<prefix><port>" ("control listening on 127.0.0.1:"); 0 when no such
// line appears within 10 s.
inline int loggedPort(DaemonProcess& d, const std::string& prefix) {
  if (!d.process().waitForOutput(prefix, std::chrono::seconds(10))) return 0;
  std::smatch m;
  const std::string log = d.log();
  if (!std::regex_search(log, m, std::regex(prefix + "([0-9]+)"))) return 0;
  return std::stoi(m[1]);
}

}  // namespace hc::integ
