// hcctl top's data and text: what one sample of the daemon holds, the per-second rates between
// two samples, and the text of one frame. Pure (no RPCs, no terminal), so that tests build frames
// from samples they make up; top_sample.cc fills samples from the Control RPCs and
// top_command.cc draws the frames.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hc::hcctl::top {

// The newest operation some local rank posted.
struct LastOp {
  std::string name;      // PyTorch's profiling name without "nccl:": "all_reduce"
  uint64_t seq = 0;      // collective_seq_id, or p2p_seq_id for send/recv (from 1)
  std::string state;     // "scheduled", "started", "completed", "failed"
  int64_t postedNs = 0;  // wall clock, ns since the epoch
};

// One communicator in one sample (Control.ListCommunicators, and TraceCommunicator for waits).
struct CommSample {
  uint64_t id = 0;
  std::string key;
  int nranks = 0;
  std::vector<int> localRanks;
  std::string state;  // "active", "failed"
  // Counted per local rank, as hcctl comms's COMPLETED: a 2-local-rank allreduce counts twice.
  uint64_t opsCompleted = 0;
  uint64_t opsFailed = 0;
  uint64_t bytesCompleted = 0;
  std::optional<LastOp> lastOp;
  // The first collective some rank has not finished (0 = none outstanding) and the ranks, of any
  // daemon, that have not posted it: who this daemon waits for.
  uint64_t waitingSeq = 0;
  std::vector<int> waitingFor;
  std::string waitingError;  // asking the communicator's daemons failed: why
};

struct Sample {
  std::chrono::steady_clock::time_point taken;  // rates
  int64_t wallNs = 0;                           // ages of operations, the clock line
  uint64_t uptimeMs = 0;
  uint32_t clients = 0;
  std::vector<CommSample> comms;
};

// What the header names: the daemon and how it is reached.
struct Source {
  std::string hostname;
  std::string version;
  std::string target;  // "unix:/run/hetero-comm/hetero-commd-admin.sock"
  double intervalSeconds = 1;
};

// A communicator's rates between two samples.
struct CommRates {
  double opsPerSecond = 0;
  double bytesPerSecond = 0;
};

// Rates of `now` against `before`, matched by id and key. A communicator absent from `before` was
// created in between: every operation it finished counts in the interval. Counters that went
// back (cannot happen on one daemon) count as 0.
CommRates ratesOf(const CommSample& now, const Sample& before, double seconds);

// The whole frame, lines ending in '\n', each cut to `width` columns (0 = no limit): a header
// (daemon, clock, uptime, totals) and a row per communicator.
std::string formatFrame(const Source& source, const Sample& before, const Sample& now,
                        size_t width);
// The header line alone and an error line, for a frame whose sample failed.
std::string formatUnavailable(const Source& source, int64_t wallNs, const std::string& why,
                              size_t width);

// The wall clock, ns since the epoch, as samples and operations carry it.
int64_t wallClockNs();

// 1536 -> "1.5 KiB": binary units, one decimal from KiB up; "0 B" below 1.
std::string formatBytes(double bytes);
// How long ago: "850ms", "4.2s", "12m", "3h", "2d"; negative (clock skew) counts as 0.
std::string formatAge(int64_t ns);
// {0, 1, 2, 5} -> "0-2,5"; {} -> "-".
std::string formatRanks(const std::vector<int>& ranks);

}  // namespace hc::hcctl::top
