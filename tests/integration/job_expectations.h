// GoogleTest expectations shared by the tests that run a job of rank workers to completion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {

// Waits for every rank (a hang shows up as this timeout, with every rank's output), then expects
// each to have exited 0 having printed "#wrong 0" and no ERROR, WRONG or HUNG line. On failure
// the ranks' output and the daemon's log tail are attached.
inline void expectJobSucceeds(RankJob& job, const DaemonProcess& daemon,
                              std::chrono::seconds timeout) {
  bool finished = job.waitAll(timeout);
  EXPECT_TRUE(finished) << "ranks still running after " << timeout.count() << " s";
  for (int r = 0; r < job.nranks(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::string out = job.rank(r).output();
    EXPECT_EQ(job.rank(r).exitCode(), 0);
    EXPECT_NE(out.find("\n#wrong 0\n"), std::string::npos);
    EXPECT_EQ(out.find("ERROR "), std::string::npos);
    EXPECT_EQ(out.find("WRONG "), std::string::npos);
    EXPECT_EQ(out.find("HUNG "), std::string::npos);
  }
  if (::testing::Test::HasFailure()) {
    ADD_FAILURE() << job.report() << "\n--- daemon log tail:\n" << daemon.logTail();
  }
}

}  // namespace hc::integ
