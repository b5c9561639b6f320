#include "bench/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hc::bench {

RankSet::~RankSet() { killAll(); }

bool RankSet::start(const Options& opts, const std::vector<Case>& cases, const hc_unique_id_t& id,
                    pid_t daemonPid, std::string* error) {
  timeoutMs_ = opts.timeoutSec > 0 ? opts.timeoutSec * 1000 : -1;
  RankLink link;
  link.parent = ::getpid();
  link.daemonPid = daemonPid;
  // One gate for every rank: a rank can take a second byte only after every rank has joined the
  // case the first one opened, so each byte in the pipe belongs to the case being opened.
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  gateRead_ = gate[0];
  gateWrite_ = gate[1];
  link.gateFd = gateRead_;
  std::fflush(nullptr);  // buffered output would be written again by every child
  for (int r = 0; r < opts.nranks; ++r) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      *error = std::string("pipe2: ") + std::strerror(errno);
      return false;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      ::close(p[0]);
      ::close(p[1]);
      return false;
    }
    if (pid == 0) {
      // The parent closed every earlier write end before forking again, so no rank holds a
      // sibling's write end (which would hide that sibling's death from the parent). The
      // earlier read ends are the parent's business: close them too.
      for (const Rank& other : ranks_) ::close(other.fd);
      ::close(p[0]);
      ::close(gateWrite_);
      if (!opts.sockets.empty()) {  // before the rank's first call, which connects
        ::setenv("HC_SOCKET", opts.sockets[static_cast<size_t>(daemonOfRank(opts, r))].c_str(), 1);
      }
      link.reportFd = p[1];
      ::_exit(runRank(opts, cases, id, r, link));
    }
    ::close(p[1]);
    Rank rank;
    rank.pid = pid;
    rank.fd = p[0];
    ranks_.push_back(rank);
  }
  ::close(gateRead_);
  gateRead_ = -1;
  return true;
}

bool RankSet::openGate(std::string* error) {
  const std::string bytes(ranks_.size(), 'g');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(gateWrite_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("opening the ranks' gate: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool RankSet::readReport(int r, CaseReport* out, std::string* error) {
  auto* p = reinterpret_cast<char*>(out);
  size_t got = 0;
  while (got < sizeof(*out)) {
    ssize_t n = ::read(ranks_[r].fd, p + got, sizeof(*out) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = describeExit(r);
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool RankSet::collect(uint32_t caseIndex, std::vector<CaseReport>* out, std::string* error) {
  const int n = static_cast<int>(ranks_.size());
  out->assign(static_cast<size_t>(n), CaseReport{});
  std::vector<bool> have(static_cast<size_t>(n), false);
  int remaining = n;
  while (remaining > 0) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (have[r]) continue;
      fds.push_back({ranks_[r].fd, POLLIN, 0});
      who.push_back(r);
    }
    int ready = ::poll(fds.data(), fds.size(), timeoutMs_);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (ready == 0) {
      std::string late;
      for (int r : who) late += (late.empty() ? "" : ", ") + std::to_string(r);
      *error = "rank(s) " + late + " reported nothing for " + std::to_string(timeoutMs_ / 1000) +
               " s (-T)";
      return false;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int r = who[i];
      CaseReport& rep = (*out)[static_cast<size_t>(r)];
      if (!readReport(r, &rep, error)) return false;
      if (rep.status != HC_OK) {
        *error = "rank " + std::to_string(r) + ": " + rep.message;
        return false;
      }
      if (rep.caseIndex != caseIndex || rep.rank != r) {
        *error = "rank " + std::to_string(r) + " reported case " + std::to_string(rep.caseIndex) +
                 ", expected " + std::to_string(caseIndex);
        return false;
      }
      have[r] = true;
      --remaining;
    }
  }
  return true;
}

bool RankSet::finish(std::string* error) {
  bool ok = true;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    // A rank that failed in finalize reports it before exiting.
    CaseReport rep{};
    std::string ignored;
    if (readReport(r, &rep, &ignored) && rep.status != HC_OK) {
      if (ok) *error = "rank " + std::to_string(r) + ": " + rep.message;
      ok = false;
    }
    std::string exit = describeExit(r);
    if (WIFEXITED(ranks_[r].status) && WEXITSTATUS(ranks_[r].status) == 0) continue;
    if (ok) *error = exit;
    ok = false;
  }
  return ok;
}

std::string RankSet::describeExit(int r) {
  Rank& rank = ranks_[r];
  if (!rank.reaped) {
    while (::waitpid(rank.pid, &rank.status, 0) < 0 && errno == EINTR) {
    }
    rank.reaped = true;
    ::close(rank.fd);
    rank.fd = -1;
  }
  std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(rank.pid) + ")";
  if (WIFSIGNALED(rank.status)) {
    return who + " was killed by signal " + std::to_string(WTERMSIG(rank.status)) + " (" +
           strsignal(WTERMSIG(rank.status)) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(rank.status));
}

void RankSet::killAll() {
  for (int* fd : {&gateRead_, &gateWrite_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  for (Rank& rank : ranks_) {
    if (!rank.reaped) ::kill(rank.pid, SIGKILL);
  }
  for (Rank& rank : ranks_) {
    if (!rank.reaped) {
      while (::waitpid(rank.pid, &rank.status, 0) < 0 && errno == EINTR) {
      }
      rank.reaped = true;
    }
    if (rank.fd >= 0) ::close(rank.fd);
    rank.fd = -1;
  }
}

}  // namespace hc::bench
