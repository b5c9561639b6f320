// The probe's process plumbing: result lines, notes, fork+exec of this program, and the pair of
// processes of a two-process CUDA primitive.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "tests/gpu/probe.h"

namespace hc::gpuprobe {

bool writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool endedAbnormally(int status) {
  return !WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 1);
}

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::Pass:
      return "PASS";
    case Verdict::Skip:
      return "SKIP";
    case Verdict::Fail:
      break;
  }
  return "FAIL";
}

std::string resultLine(const std::string& name, const Outcome& outcome) {
  std::string line = std::string(verdictName(outcome.verdict)) + " " + name;
  if (!outcome.text.empty()) line += " " + outcome.text;
  // One line per primitive, whatever a driver's message holds.
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line;
}

bool parseResultLine(const std::string& line, const std::string& name, Outcome* out) {
  for (Verdict verdict : {Verdict::Pass, Verdict::Fail, Verdict::Skip}) {
    const std::string head = std::string(verdictName(verdict)) + " " + name;
    if (line.compare(0, head.size(), head) != 0) continue;
    if (line.size() > head.size() && line[head.size()] != ' ') continue;
    out->verdict = verdict;
    out->text = line.size() > head.size() ? line.substr(head.size() + 1) : "";
    return true;
  }
  return false;
}

void note(const char* who, const std::string& what) {
  (void)writeAll(STDOUT_FILENO, std::string("step ") + who + " " + what + "\n");
}

pid_t spawnSelf(const ProbeOptions& options, const std::string& name, const std::string& role,
                int sockFd, int stdoutFd, bool newGroup) {
  // Everything the child needs is built before fork: between fork and exec it may only make
  // async-signal-safe calls.
  std::vector<std::string> args = {
      options.self, "--child",     name, "--device", std::to_string(options.device),
      "--driver",   options.driver};
  if (!role.empty()) {
    args.insert(args.end(), {"--role", role, "--sock", std::to_string(sockFd)});
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid != 0) {
    // Also here, so that a kill of the group cannot come before the child made it.
    if (pid > 0 && newGroup) (void)::setpgid(pid, pid);
    return pid;
  }
  if (newGroup) (void)::setpgid(0, 0);
  if (stdoutFd != STDOUT_FILENO) (void)::dup2(stdoutFd, STDOUT_FILENO);
  if (sockFd >= 0) {
    const int flags = ::fcntl(sockFd, F_GETFD);
    (void)::fcntl(sockFd, F_SETFD, flags & ~FD_CLOEXEC);
  }
  ::execv(options.self.c_str(), argv.data());
  ::_exit(127);
}

std::string describeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "wait status " + std::to_string(status);
}

bool waitWithTimeout(pid_t pid, int timeoutMs, int* status) {
  const int64_t deadline = monotonicMicros() + int64_t{timeoutMs} * 1000;
  while (true) {
    const pid_t done = ::waitpid(pid, status, WNOHANG);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) {
      *status = 0;
      return true;  // not our child (already reaped): nothing left to wait for
    }
    if (monotonicMicros() >= deadline) return false;
    ::usleep(5000);
  }
}

bool readLines(int fd, int timeoutMs, std::string* pending, std::vector<std::string>* lines) {
  bool open = true;
  pollfd pfd{fd, POLLIN, 0};
  if (::poll(&pfd, 1, timeoutMs) > 0) {
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) pending->append(buffer, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) open = false;
  }
  size_t eol;
  while ((eol = pending->find('\n')) != std::string::npos) {
    lines->push_back(pending->substr(0, eol));
    pending->erase(0, eol + 1);
  }
  if (!open && !pending->empty()) {
    lines->push_back(*pending);
    pending->clear();
  }
  return open;
}

Outcome runPair(const ProbeOptions& options, const std::string& name) {
  int sock[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) != 0) {
    return fail("socketpair: " + errnoText(errno));
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(sock[0]);
    ::close(sock[1]);
    return fail("pipe2: " + errnoText(error));
  }
  const pid_t a = spawnSelf(options, name, "a", sock[0], out[1], false);
  const pid_t b = a > 0 ? spawnSelf(options, name, "b", sock[1], out[1], false) : -1;
  const int spawnError = errno;
  // Only A and B hold the socket and the pipe now: either one ending shows as EOF to the other.
  ::close(sock[0]);
  ::close(sock[1]);
  ::close(out[1]);
  if (a < 0 || b < 0) {
    if (a > 0) (void)::kill(a, SIGKILL);
    int status = 0;
    if (a > 0) (void)::waitpid(a, &status, 0);
    ::close(out[0]);
    return fail("fork: " + errnoText(spawnError));
  }

  // Relays the notes of both as they come (the runner names the last ones after a timeout) and
  // keeps A's result. B reports to A over the socket and prints no result of its own.
  Outcome result;
  bool haveResult = false;
  std::string pending;
  int statusA = 0, statusB = 0;
  bool endedA = false, endedB = false, killedB = false;
  int64_t endedAtA = 0;
  bool open = true;
  while (open || !endedA || !endedB) {
    std::vector<std::string> lines;
    if (open) {
      open = readLines(out[0], 100, &pending, &lines);
    } else {
      ::usleep(5000);
    }
    for (const std::string& line : lines) {
      if (parseResultLine(line, name, &result)) {
        haveResult = true;
      } else {
        (void)writeAll(line.compare(0, 5, "step ") == 0 ? STDOUT_FILENO : STDERR_FILENO,
                       line + "\n");
      }
    }
    if (!endedA && ::waitpid(a, &statusA, WNOHANG) == a) {
      endedA = true;
      endedAtA = monotonicMicros();
    }
    if (!endedB && ::waitpid(b, &statusB, WNOHANG) == b) endedB = true;
    // B has nothing left to do once A reported; a B stuck in the driver must not hold the run.
    if (endedA && !endedB && !killedB && monotonicMicros() - endedAtA > 5'000'000) {
      (void)::kill(b, SIGKILL);
      killedB = true;
    }
  }
  ::close(out[0]);

  std::string ends = "process A: " + describeWaitStatus(statusA) +
                     "; process B: " + describeWaitStatus(statusB) +
                     (killedB ? " (still running 5 s after A ended)" : "");
  if (!haveResult) return fail("(no result from process A; " + ends + ")");
  if (endedAbnormally(statusA) || endedAbnormally(statusB) || killedB) {
    return fail(result.text + " (" + verdictName(result.verdict) + ", but " + ends + ")");
  }
  return result;
}

int64_t monotonicNanos() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

int64_t monotonicMicros() { return monotonicNanos() / 1000; }

std::string formatMicros(double micros) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", micros);
  return text;
}

std::string errnoText(int error) {
  return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")";
}

}  // namespace hc::gpuprobe
