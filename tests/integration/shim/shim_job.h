// The ranks of one job of hc_shim_check (or hc_shim_check_rccl) processes, for the shim's
// integration tests: each rank's library, daemon, extra flags and environment.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"

namespace hc::integ {

enum class ShimLib { Nccl, Rccl };
// The path of hc_shim_check (libnccl.so.2) or hc_shim_check_rccl (librccl.so.1).
const char* shimProgram(ShimLib lib);

// A fresh ncclGetUniqueId made through the shim by a client of the daemon at socket, as hex; ""
// with *error on failure.
std::string newShimId(const std::string& socket, const std::string& dir, std::string* error);

struct ShimRankSpec {
  ShimLib lib = ShimLib::Nccl;
  std::string socket;             // the daemon this rank uses
  std::vector<std::string> args;  // after --rank, --nranks and --id
  EnvVars env;                    // besides HC_SOCKET
};

class ShimJob {
 public:
  // Starts ranks[r] as rank r of the job with id; output in dir/<name>-rank<r>.log. Null with
  // *error when a process cannot be started.
  static std::unique_ptr<ShimJob> start(const std::vector<ShimRankSpec>& ranks,
                                        const std::string& id, const std::string& dir,
                                        const std::string& name, std::string* error);
  ChildProcess& rank(int r) { return *procs_[static_cast<size_t>(r)]; }
  int nranks() const { return static_cast<int>(procs_.size()); }
  // Waits up to timeout for every rank to exit; "" when each exited 0 with "#wrong 0" and printed
  // no ERROR or WRONG line, else what went wrong, with every rank's output.
  std::string expectAllPassed(std::chrono::milliseconds timeout);

 private:
  std::vector<std::unique_ptr<ChildProcess>> procs_;
};

}  // namespace hc::integ
