#include "tests/integration/rank_job.h"

#include <cstdio>
#include <cstdlib>

#include "hetero_comm/hc.h"

namespace hc::integ {

std::string uniqueIdHex(const std::string& socketPath, const std::string& dir,
                        std::string* error) {
  // In a child: the id names the daemon the client is connected to, and the test process must
  // not keep a connection to one test's daemon into the next test.
  static int serial = 0;
  auto tool = ChildProcess::spawn({HC_RANK_WORKER_PATH, "--new-id"}, {{"HC_SOCKET", socketPath}},
                                  dir + "/new-id-" + std::to_string(serial++) + ".log", error);
  if (!tool) return "";
  if (!tool->waitExit(std::chrono::seconds(10)) || tool->exitCode() != 0) {
    *error = "hc_rank_worker --new-id: " + tool->describeEnd() + ": " + tool->output();
    return "";
  }
  std::string hex = tool->output();
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  if (hex.size() != 2 * sizeof(hc_unique_id_t)) {
    *error = "hc_rank_worker --new-id printed '" + hex + "'";
    return "";
  }
  return hex;
}

std::optional<StatusLine> findStatusLine(const std::string& output, std::string_view tag) {
  std::string prefix = std::string(tag) + " status=";
  size_t pos = 0;
  while ((pos = output.find(prefix, pos)) != std::string::npos) {
    if (pos == 0 || output[pos - 1] == '\n') break;
    pos += prefix.size();
  }
  if (pos == std::string::npos) return std::nullopt;
  size_t end = output.find('\n', pos);
  std::string line = output.substr(pos + prefix.size(),
                                   end == std::string::npos ? end : end - pos - prefix.size());
  StatusLine out;
  size_t space = line.find(' ');
  out.status = std::atoi(line.substr(0, space).c_str());
  size_t text = line.find("text=");
  if (text != std::string::npos) out.text = line.substr(text + 5);
  return out;
}

std::unique_ptr<RankJob> RankJob::start(const DaemonProcess& daemon, std::string name, int nranks,
                                        std::vector<std::string> args, std::string* error,
                                        const PerRankArgs& perRank) {
  return startWorker(HC_RANK_WORKER_PATH, daemon, std::move(name), nranks, std::move(args), error,
                     perRank);
}

std::unique_ptr<RankJob> RankJob::startWorker(const std::string& worker,
                                              const DaemonProcess& daemon, std::string name,
                                              int nranks, std::vector<std::string> args,
                                              std::string* error, const PerRankArgs& perRank) {
  std::string id = uniqueIdHex(daemon.socketPath(), daemon.dir(), error);
  if (id.empty()) return nullptr;
  auto job = std::make_unique<RankJob>();
  job->name_ = std::move(name);
  for (int r = 0; r < nranks; ++r) {
    std::vector<std::string> argv = {
        worker, "--rank", std::to_string(r), "--nranks", std::to_string(nranks), "--id", id};
    argv.insert(argv.end(), args.begin(), args.end());
    if (perRank) {
      auto extra = perRank(r);
      argv.insert(argv.end(), extra.begin(), extra.end());
    }
    std::string out = daemon.dir() + "/" + job->name_ + "-rank" + std::to_string(r) + ".log";
    auto child = ChildProcess::spawn(argv, daemon.clientEnv(), out, error);
    if (!child) return nullptr;
    job->ranks_.push_back(std::move(child));
  }
  return job;
}

bool RankJob::waitAll(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& r : ranks_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!r->waitExit(left.count() > 0 ? left : std::chrono::milliseconds(0))) return false;
  }
  return true;
}

bool RankJob::waitAllOutput(std::string_view text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& r : ranks_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!r->waitForOutput(text, left.count() > 0 ? left : std::chrono::milliseconds(0))) {
      return false;
    }
  }
  return true;
}

std::string RankJob::report() {
  std::string out;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r]->poll();
    std::string text = ranks_[r]->output();
    // The matrix prints a line per wrong case; the head and tail say enough.
    if (text.size() > 6000)
      text = text.substr(0, 3000) + "\n...\n" + text.substr(text.size() - 3000);
    out += "--- " + name_ + " rank " + std::to_string(r) + " (" + ranks_[r]->describeEnd() +
           "):\n" + text;
  }
  return out;
}

}  // namespace hc::integ
