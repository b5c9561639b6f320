// SmallArea: the daemon's side of a communicator's small-operation area (common/ipc/small_area.h):
// the sealed memfd its local ranks map, created when the communicator forms. The daemon never
// reads operands from it; it fails the area when the communicator fails (a rank died, aborted or
// left, a deadline, a mismatch), so no rank waits there on a dead party, and it reads the ranks'
// counters for operators. Runs on the IPC thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/ipc/small_area.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/observe/flight_recorder.h"

namespace hc::session {

class SmallArea {
 public:
  static Result<std::shared_ptr<SmallArea>> create(int nranks, const std::string& name);
  ~SmallArea();
  SmallArea(const SmallArea&) = delete;
  SmallArea& operator=(const SmallArea&) = delete;

  int fd() const { return fd_.get(); }
  size_t bytes() const { return bytes_; }
  int nranks() const { return view_.nranks; }

  // Fails the area once with why (later calls keep the first reason) and wakes every waiter.
  void fail(const Status& why);

  // What each rank's line says now: small ops issued and finished through the area. Read from
  // memory the ranks write: figures for operators, never trusted for anything else.
  struct RankCounters {
    uint64_t issued = 0;
    uint64_t done = 0;
  };
  std::vector<RankCounters> counters() const;
  // Adds the small ops to each rank's collectives posted and finished, so "who has not posted"
  // (hcctl trace) counts them too. Any thread.
  void addProgress(std::vector<observe::RankProgress>* ranks) const;

 private:
  SmallArea() = default;
  UniqueFd fd_;
  size_t bytes_ = 0;
  ipc::AreaView view_;
};

}  // namespace hc::session
