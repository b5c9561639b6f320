#include "tests/integration/multi_daemon.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/integration/rank_job.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

std::chrono::milliseconds leftUntil(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

}  // namespace

bool writeTokenFile(const std::string& path, std::string* error) {
  unsigned char bytes[32];
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    *error = "getrandom: " + std::string(std::strerror(errno));
    return false;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "open " + path + ": " + std::strerror(errno);
    return false;
  }
  bool ok = ::write(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes)) &&
            ::fchmod(fd, 0600) == 0;
  if (!ok) *error = "write " + path + ": " + std::strerror(errno);
  ::close(fd);
  return ok;
}

std::unique_ptr<DaemonCluster> DaemonCluster::start(ClusterOptions options, std::string* error) {
  std::unique_ptr<DaemonCluster> c(new DaemonCluster());
  c->options_ = std::move(options);
  c->dir_ = test::makeTempDir("hc-cluster");
  if (c->dir_.empty()) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  c->tokenPath_ = c->dir_ + "/token";
  if (!writeTokenFile(c->tokenPath_, error)) return nullptr;
  // tcp,self: no shared-memory or CMA transport between the daemons, so that daemons on one host
  // talk over sockets like daemons on separate nodes.
  DaemonProcess::Launch launch;
  launch.env = {{"UCX_TLS", "tcp,self"}};
  for (int d = 0; d < c->options_.daemons; ++d) {
    std::string listen =
        c->options_.listenAddress ? c->options_.listenAddress(d) : std::string("127.0.0.1:0");
    std::vector<std::string> args = {"--set", "peer.listen=" + listen, "--set",
                                     "peer.token_file=" + c->tokenPath_};
    args.insert(args.end(), c->options_.daemonArgs.begin(), c->options_.daemonArgs.end());
    if (c->options_.perDaemonArgs) {
      auto extra = c->options_.perDaemonArgs(d);
      args.insert(args.end(), extra.begin(), extra.end());
    }
    launch.commandPrefix = c->commandPrefix(d);
    std::string why;
    auto daemon = DaemonProcess::start(args, launch, &why);
    if (!daemon) {
      *error = "daemon " + std::to_string(d) + ": " + why;
      return nullptr;
    }
    c->daemons_.push_back(std::move(daemon));
  }
  return c;
}

DaemonCluster::~DaemonCluster() {
  // A daemon stopped with SIGSTOP dies of SIGKILL as well; the destructors reap it.
  daemons_.clear();
  test::removeTempDir(dir_);
}

std::vector<std::string> DaemonCluster::commandPrefix(int d) const {
  return options_.commandPrefix ? options_.commandPrefix(d) : std::vector<std::string>{};
}

std::string DaemonCluster::newId(int d, std::string* error) {
  return uniqueIdHex(daemon(d).socketPath(), dir_, error);
}

std::string DaemonCluster::logTails(size_t lines) const {
  std::string out;
  for (size_t d = 0; d < daemons_.size(); ++d) {
    daemons_[d]->process().poll();
    out += "--- daemon " + std::to_string(d) + " (pid " + std::to_string(daemons_[d]->pid()) +
           ", " + daemons_[d]->process().describeEnd() + ") log tail:\n" +
           daemons_[d]->logTail(lines);
  }
  return out;
}

std::unique_ptr<ClusterJob> ClusterJob::start(DaemonCluster& cluster, std::string name,
                                              const std::vector<int>& placement,
                                              std::vector<std::string> args, std::string* error,
                                              const PerRankArgs& perRank) {
  std::vector<RankSpec> specs;
  for (size_t r = 0; r < placement.size(); ++r) {
    RankSpec s;
    s.daemon = placement[r];
    s.rank = static_cast<int>(r);
    if (perRank) s.args = perRank(s.rank);
    specs.push_back(std::move(s));
  }
  return startSpecs(cluster, std::move(name), static_cast<int>(placement.size()), specs,
                    std::move(args), error);
}

std::unique_ptr<ClusterJob> ClusterJob::startSpecs(DaemonCluster& cluster, std::string name,
                                                   int nranks, const std::vector<RankSpec>& specs,
                                                   std::vector<std::string> args,
                                                   std::string* error) {
  auto job = std::make_unique<ClusterJob>();
  job->name_ = std::move(name);
  job->id_ = cluster.newId(0, error);
  if (job->id_.empty()) return nullptr;
  job->specs_ = specs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RankSpec& s = specs[i];
    std::vector<std::string> argv = cluster.commandPrefix(s.daemon);
    argv.insert(argv.end(), {HC_RANK_WORKER_PATH, "--rank", std::to_string(s.rank), "--nranks",
                             std::to_string(nranks), "--id", s.id.empty() ? job->id_ : s.id});
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), s.args.begin(), s.args.end());
    std::string out = cluster.dir() + "/" + job->name_ + "-" + std::to_string(i) + "-rank" +
                      std::to_string(s.rank) + "-d" + std::to_string(s.daemon) + ".log";
    auto child = ChildProcess::spawn(argv, cluster.daemon(s.daemon).clientEnv(), out, error);
    if (!child) return nullptr;
    job->procs_.push_back(std::move(child));
  }
  return job;
}

std::vector<int> ClusterJob::onDaemon(int d) const {
  std::vector<int> out;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].daemon == d) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool ClusterJob::waitAll(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& p : procs_) {
    if (!p->waitExit(leftUntil(deadline))) return false;
  }
  return true;
}

bool ClusterJob::waitAllOutput(std::string_view text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& p : procs_) {
    if (!p->waitForOutput(text, leftUntil(deadline))) return false;
  }
  return true;
}

std::string ClusterJob::report() {
  std::string out;
  for (size_t i = 0; i < procs_.size(); ++i) {
    procs_[i]->poll();
    std::string text = procs_[i]->output();
    // The matrix prints a line per wrong case; the head and tail say enough.
    if (text.size() > 6000) {
      text = text.substr(0, 3000) + "\n...\n" + text.substr(text.size() - 3000);
    }
    out += "--- " + name_ + " rank " + std::to_string(specs_[i].rank) + " on daemon " +
           std::to_string(specs_[i].daemon) + " (pid " + std::to_string(procs_[i]->pid()) + ", " +
           procs_[i]->describeEnd() + "):\n" + text;
  }
  return out;
}

void expectClusterJobSucceeds(ClusterJob& job, DaemonCluster& cluster,
                              std::chrono::seconds timeout) {
  std::string problems;
  if (!job.waitAll(timeout)) {
    problems += "ranks still running after " + std::to_string(timeout.count()) + " s\n";
  }
  for (int i = 0; i < job.size(); ++i) {
    const std::string who = "rank " + std::to_string(job.spec(i).rank) + " on daemon " +
                            std::to_string(job.spec(i).daemon) + ": ";
    const std::string out = job.proc(i).output();
    if (job.proc(i).exitCode() != 0) problems += who + job.proc(i).describeEnd() + "\n";
    if (out.find("\n#wrong 0\n") == std::string::npos) problems += who + "no '#wrong 0'\n";
    for (const char* bad : {"ERROR ", "WRONG ", "HUNG "}) {
      if (out.find(bad) != std::string::npos) problems += who + "printed " + bad + "lines\n";
    }
  }
  EXPECT_EQ(problems, "") << job.report() << "\n" << cluster.logTails();
}

int runCommand(const std::vector<std::string>& argv, const std::string& outputPath,
               std::chrono::milliseconds timeout, std::string* output) {
  std::string error;
  auto p = ChildProcess::spawn(argv, {}, outputPath, &error);
  if (!p) {
    *output = error;
    return -1;
  }
  bool done = p->waitExit(timeout);
  *output = p->output();
  if (!done) return -1;  // the destructor kills it
  return p->exitCode();
}

}  // namespace hc::integ
