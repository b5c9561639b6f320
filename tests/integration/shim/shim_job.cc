#include "tests/integration/shim/shim_job.h"

#include <algorithm>

namespace hc::integ {

const char* shimProgram(ShimLib lib) {
  return lib == ShimLib::Nccl ? HC_SHIM_CHECK_PATH : HC_SHIM_CHECK_RCCL_PATH;
}

std::string newShimId(const std::string& socket, const std::string& dir, std::string* error) {
  auto tool = ChildProcess::spawn({HC_SHIM_CHECK_PATH, "--new-id"}, {{"HC_SOCKET", socket}},
                                  dir + "/shim-new-id.log", error);
  if (!tool) return "";
  if (!tool->waitExit(std::chrono::seconds(30)) || tool->exitCode() != 0) {
    *error = "hc_shim_check --new-id: " + tool->describeEnd() + ": " + tool->output();
    return "";
  }
  std::string hex = tool->output();
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  return hex;
}

std::unique_ptr<ShimJob> ShimJob::start(const std::vector<ShimRankSpec>& ranks,
                                        const std::string& id, const std::string& dir,
                                        const std::string& name, std::string* error) {
  auto job = std::unique_ptr<ShimJob>(new ShimJob);
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r) {
    const ShimRankSpec& spec = ranks[static_cast<size_t>(r)];
    std::vector<std::string> argv = {shimProgram(spec.lib),
                                     "--rank",
                                     std::to_string(r),
                                     "--nranks",
                                     std::to_string(n),
                                     "--id",
                                     id};
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    EnvVars env = spec.env;
    env.emplace_back("HC_SOCKET", spec.socket);
    auto p = ChildProcess::spawn(argv, env, dir + "/" + name + "-rank" + std::to_string(r) + ".log",
                                 error);
    if (!p) return nullptr;
    job->procs_.push_back(std::move(p));
  }
  return job;
}

std::string ShimJob::expectAllPassed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string problems, outputs;
  for (int r = 0; r < nranks(); ++r) {
    ChildProcess& p = rank(r);
    const std::string who = "rank " + std::to_string(r) + ": ";
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!p.waitExit(std::max(left, std::chrono::milliseconds(0)))) {
      problems += who + "still running\n";
    }
    const std::string out = p.output();
    outputs += "--- " + who + p.describeEnd() + "\n" + out;
    if (p.exitCode() != 0) problems += who + p.describeEnd() + "\n";
    if (out.find("#wrong 0\n") == std::string::npos) problems += who + "no '#wrong 0'\n";
    for (const char* bad : {"ERROR ", "WRONG "}) {
      if (out.find(bad) != std::string::npos) problems += who + "printed " + bad + "lines\n";
    }
  }
  return problems.empty() ? "" : problems + outputs;
}

}  // namespace hc::integ
