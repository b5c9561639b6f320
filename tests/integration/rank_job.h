// RankJob: the N hc_rank_worker processes of one communicator, started against one daemon, and
// the parsing of the lines they print (see worker_modes.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace hc::integ {

// A fresh hc_get_unique_id made by a client of the daemon at socketPath (so the id names that
// daemon as root when it serves multi-node jobs), as the 256 hex digits the worker takes. ""
// with *error on failure; the tool's output goes to a file in dir.
std::string uniqueIdHex(const std::string& socketPath, const std::string& dir, std::string* error);

struct StatusLine {
  int status = -1;
  std::string text;
};
// The first "<tag> status=<n> text=<t>" line of output.
std::optional<StatusLine> findStatusLine(const std::string& output, std::string_view tag);

class RankJob {
 public:
  // Extra worker flags for one rank (e.g. only one rank stalls).
  using PerRankArgs = std::function<std::vector<std::string>(int rank)>;

  // Starts nranks workers of one new communicator; name keeps output files apart. Returns null
  // with *error when a process cannot be started.
  static std::unique_ptr<RankJob> start(const DaemonProcess& daemon, std::string name, int nranks,
                                        std::vector<std::string> args, std::string* error,
                                        const PerRankArgs& perRank = nullptr);
  // The same with another worker program that takes --rank, --nranks and --id alike
  // (hc_small_ops_worker).
  static std::unique_ptr<RankJob> startWorker(const std::string& worker,
                                              const DaemonProcess& daemon, std::string name,
                                              int nranks, std::vector<std::string> args,
                                              std::string* error,
                                              const PerRankArgs& perRank = nullptr);

  int nranks() const { return static_cast<int>(ranks_.size()); }
  ChildProcess& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  // Waits until every rank has exited; false if some still run at the deadline.
  bool waitAll(std::chrono::milliseconds timeout);
  // Waits until every rank printed text.
  bool waitAllOutput(std::string_view text, std::chrono::milliseconds timeout);
  // Every rank's end and output, for failure messages.
  std::string report();

 private:
  std::string name_;
  std::vector<std::unique_ptr<ChildProcess>> ranks_;
};

}  // namespace hc::integ
