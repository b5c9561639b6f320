// ChildProcess: a process the tests start (the daemon or a rank worker), with stdout and stderr in
// a file the test can read while the process runs. Used from the test's main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hc::integ {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the test's environment plus env; stdin is /dev/null. The child
  // dies with the test process. Returns null and sets *error when the process cannot be forked;
  // a failed exec shows as exit code 127.
  static std::unique_ptr<ChildProcess> spawn(const std::vector<std::string>& argv,
                                             const EnvVars& env, const std::string& outputPath,
                                             std::string* error);
  // A process still running is killed (SIGKILL) and reaped: a failed test leaves no strays.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reaps the process if it has exited; true once it has.
  bool poll();
  // Waits for the process to exit; false when it still runs after timeout.
  bool waitExit(std::chrono::milliseconds timeout);
  // After exit: the exit code, or -1 when a signal ended it.
  int exitCode() const;
  int termSignal() const;
  // "exit 0", "signal 9", or "running".
  std::string describeEnd() const;
  void sendSignal(int sig);

  std::string output() const;
  // Polls the output for text; false when it has not appeared within timeout, or the process
  // exited without printing it.
  bool waitForOutput(std::string_view text, std::chrono::milliseconds timeout);
  const std::string& outputPath() const { return outputPath_; }

 private:
  ChildProcess(pid_t pid, std::string outputPath) : pid_(pid), outputPath_(std::move(outputPath)) {}

  pid_t pid_;
  std::string outputPath_;
  bool exited_ = false;
  int status_ = 0;
};

// Reads a whole file ("" when it cannot be read).
std::string readFile(const std::string& path);

}  // namespace hc::integ
