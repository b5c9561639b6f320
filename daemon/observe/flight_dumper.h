// FlightDumper: writes flight-record dumps (flight_json.h) on a thread of its own. An incident
// costs the IPC thread a snapshot, never a file write; a client that makes communicators fail
// again and again gets `burst` dumps at once and `perMinute` after that (the rest are counted
// and logged, not written), and the state directory keeps the newest `keepFiles` dumps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"
#include "daemon/observe/flight_recorder.h"

namespace hc::observe {

class FlightDumper {
 public:
  struct Options {
    std::string stateDir;
    uint32_t burst = 10;      // dumps written back to back before the rate applies
    uint32_t perMinute = 10;  // the rate after that
    size_t keepFiles = 200;   // the oldest flight-*.json beyond this many are removed
    size_t maxQueued = 16;    // snapshots waiting for the thread; more are skipped
    // The group that may read the dumps (dumpFlightRecord), looked up once, when the dumper is
    // made: a group lookup may go through NSS modules (nss-systemd talks to userdb over sockets)
    // that are not safe beside the daemon's other threads. "" or a group the system lacks then:
    // the daemon's own. A group made later counts after a restart.
    std::string readerGroup = "hetero-comm-admin";
  };
  // Called on the dumper's thread after each dump, with its path or why it failed.
  using Done = std::function<void(const Result<std::string>& path, const std::string& what)>;

  FlightDumper(Options options, Done onDone);
  // Writes what is queued, then stops the thread.
  ~FlightDumper();
  FlightDumper(const FlightDumper&) = delete;
  FlightDumper& operator=(const FlightDumper&) = delete;

  // Queues a dump; false (and counted in skipped()) when over the rate or the queue is full.
  // `what` names the dump in the Done call (e.g. the communicator).
  bool submit(FlightSnapshot snapshot, std::string reason, std::string detail, std::string what);
  uint64_t skipped() const;

 private:
  struct Job {
    FlightSnapshot snapshot;
    std::string reason, detail, what;
  };
  void run();
  void rotate() const;
  static std::optional<gid_t> lookUpGroup(const std::string& name);

  Options options_;
  const std::optional<gid_t> readerGid_;  // before thread_ starts: read by it
  Done onDone_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
  uint64_t skipped_ = 0;
  std::thread thread_;
};

}  // namespace hc::observe
