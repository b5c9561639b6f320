// DaemonCluster: K hetero-commd processes on one machine that form communicators across each
// other (multi-node), and ClusterJob: the rank workers of one communicator spread over them.
//
// Each daemon listens for its peers on 127.0.0.1:0 (or an address the test picks) and all share
// one cluster token file. Their UCX runs with UCX_TLS=tcp,self: without shared memory and CMA
// transports, daemons on one host reach each other only over TCP sockets, exactly as daemons on
// separate nodes do. The unique id of a job is made at daemon 0 (hc_rank_worker --new-id), so it
// names daemon 0's Peer address as the root.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace hc::integ {

// Writes 32 random bytes to path with mode 0600, as the daemons require of a token file.
bool writeTokenFile(const std::string& path, std::string* error);

struct ClusterOptions {
  int daemons = 2;
  // Flags every daemon gets (after the peer flags, so a test may override those).
  std::vector<std::string> daemonArgs;
  // Flags for daemon d alone, after daemonArgs (e.g. a different token file).
  std::function<std::vector<std::string>(int d)> perDaemonArgs;
  // The peer listener of daemon d; default 127.0.0.1:0.
  std::function<std::string(int d)> listenAddress;
  // A command daemon d and its ranks run under (e.g. ip netns exec NS); default none.
  std::function<std::vector<std::string>(int d)> commandPrefix;
};

class DaemonCluster {
 public:
  // Makes the shared directory and token, then starts every daemon (each waits for its socket).
  // Null with *error (which holds the failing daemon's log) on failure.
  static std::unique_ptr<DaemonCluster> start(ClusterOptions options, std::string* error);
  // Daemons end (SIGKILL if still running) before the shared directory goes.
  ~DaemonCluster();
  DaemonCluster(const DaemonCluster&) = delete;
  DaemonCluster& operator=(const DaemonCluster&) = delete;

  int size() const { return static_cast<int>(daemons_.size()); }
  DaemonProcess& daemon(int d) { return *daemons_[static_cast<size_t>(d)]; }
  const std::string& dir() const { return dir_; }
  const std::string& tokenPath() const { return tokenPath_; }
  std::vector<std::string> commandPrefix(int d) const;

  // A fresh unique id made by a client of daemon d: it names daemon d as the root.
  std::string newId(int d, std::string* error);
  // The log tail of every daemon, to attach to a failure.
  std::string logTails(size_t lines = 40) const;

 private:
  DaemonCluster() = default;

  ClusterOptions options_;
  std::string dir_;
  std::string tokenPath_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

// One worker process: which daemon it uses, the rank it claims, and its own flags.
struct RankSpec {
  int daemon = 0;
  int rank = 0;
  std::vector<std::string> args;  // after the job's common flags
  std::string id;                 // "" = the job's id
};

class ClusterJob {
 public:
  using PerRankArgs = std::function<std::vector<std::string>(int rank)>;

  // Rank r of nranks = placement.size() runs against daemon placement[r], all with one new id
  // made at daemon 0. Null with *error when the id or a process cannot be made.
  static std::unique_ptr<ClusterJob> start(DaemonCluster& cluster, std::string name,
                                           const std::vector<int>& placement,
                                           std::vector<std::string> args, std::string* error,
                                           const PerRankArgs& perRank = nullptr);
  // Any set of workers of one communicator of nranks: several may claim one rank, some ranks
  // may be missing. Process i is specs[i].
  static std::unique_ptr<ClusterJob> startSpecs(DaemonCluster& cluster, std::string name,
                                                int nranks, const std::vector<RankSpec>& specs,
                                                std::vector<std::string> args, std::string* error);

  int size() const { return static_cast<int>(procs_.size()); }
  ChildProcess& proc(int i) { return *procs_[static_cast<size_t>(i)]; }
  const RankSpec& spec(int i) const { return specs_[static_cast<size_t>(i)]; }
  const std::string& id() const { return id_; }
  // Process indices whose daemon is d.
  std::vector<int> onDaemon(int d) const;

  // Waits until every process has exited; false if some still run at the deadline.
  bool waitAll(std::chrono::milliseconds timeout);
  bool waitAllOutput(std::string_view text, std::chrono::milliseconds timeout);
  // Every process's daemon, end and output, for failure messages.
  std::string report();

 private:
  std::string name_;
  std::string id_;
  std::vector<RankSpec> specs_;
  std::vector<std::unique_ptr<ChildProcess>> procs_;
};

// Waits for every rank, then expects each to have exited 0 having printed "#wrong 0" and no
// ERROR, WRONG or HUNG line; on failure attaches every rank's output and every daemon's log tail.
void expectClusterJobSucceeds(ClusterJob& job, DaemonCluster& cluster,
                              std::chrono::seconds timeout);

// Runs argv to completion (at most timeout); returns its exit code (-1 on a signal or timeout)
// with its output in *output.
int runCommand(const std::vector<std::string>& argv, const std::string& outputPath,
               std::chrono::milliseconds timeout, std::string* output);

}  // namespace hc::integ
