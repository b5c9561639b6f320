#include "tests/integration/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace hc::integ {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);

std::vector<std::string> mergedEnvironment(const EnvVars& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [key, value] : overrides) {
      replaced = replaced || (entry.size() > key.size() && entry.substr(0, key.size()) == key &&
                              entry[key.size()] == '=');
    }
    if (!replaced) out.emplace_back(entry);
  }
  for (const auto& [key, value] : overrides) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv,
                                                  const EnvVars& env, const std::string& outputPath,
                                                  std::string* error) {
  std::vector<std::string> args = argv;
  std::vector<std::string> envStrings = mergedEnvironment(env);
  std::vector<char*> argp = pointers(args);
  std::vector<char*> envp = pointers(envStrings);
  int out = ::open(outputPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    *error = "open " + outputPath + ": " + std::strerror(errno);
    return nullptr;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec. PDEATHSIG: a test binary killed by a
    // ctest timeout takes its daemon and workers with it instead of leaving them running.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
        ::dup2(out, STDERR_FILENO) < 0) {
      ::_exit(127);
    }
    ::execve(argp[0], argp.data(), envp.data());
    ::_exit(127);
  }
  int forkErrno = errno;
  ::close(out);
  if (pid < 0) {
    *error = "fork: " + std::string(std::strerror(forkErrno));
    return nullptr;
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, outputPath));
}

ChildProcess::~ChildProcess() {
  if (!poll()) {
    ::kill(pid_, SIGKILL);
    waitExit(std::chrono::seconds(10));
  }
}

bool ChildProcess::poll() {
  if (exited_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    exited_ = true;
    status_ = status;
  }
  return exited_;
}

bool ChildProcess::waitExit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  return true;
}

int ChildProcess::exitCode() const {
  return exited_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

int ChildProcess::termSignal() const {
  return exited_ && WIFSIGNALED(status_) ? WTERMSIG(status_) : 0;
}

std::string ChildProcess::describeEnd() const {
  if (!exited_) return "running";
  if (WIFEXITED(status_)) return "exit " + std::to_string(WEXITSTATUS(status_));
  return "signal " + std::to_string(WTERMSIG(status_));
}

void ChildProcess::sendSignal(int sig) {
  if (!exited_) ::kill(pid_, sig);
}

std::string ChildProcess::output() const { return readFile(outputPath_); }

bool ChildProcess::waitForOutput(std::string_view text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool gone = poll();
    if (output().find(text) != std::string::npos) return true;
    if (gone || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval * 2);
  }
}

}  // namespace hc::integ
