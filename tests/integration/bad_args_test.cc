// Invalid arguments through the client library: alltoallv counts and displacements that are
// "negative" (wrapped size_t) or overflow, peers and roots out of range, a send or receive to
// self without its partner in the same group. Each is refused with HC_INVALID_ARGUMENT and a
// message (so is an all-to-all in place, which cannot work), on every rank alike, and the
// communicator keeps working (a verified ring exchange, an alltoallv and a self send/recv pair
// afterwards).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/job_expectations.h"
#include "tests/integration/rank_job.h"

namespace hc::integ {
namespace {

const std::vector<std::string> kRefusedChecks = {
    "alltoallv_sendcount_huge",  "alltoallv_sendcount_negative",
    "alltoallv_sdispl_overflow", "alltoallv_recvcount_negative",
    "alltoallv_rdispl_negative", "alltoallv_bytes_overflow",
    "alltoallv_null_counts",     "alltoall_count_overflow",
    "alltoall_in_place",         "gather_root_out_of_range",
    "scatter_root_negative",     "self_send_alone",
    "self_recv_alone",           "self_send_group_without_recv",
};

class BadArgsTest : public ::testing::TestWithParam<int> {};

TEST_P(BadArgsTest, EveryInvalidCallIsRefusedWithAMessageAndTheCommunicatorStillWorks) {
  const int nranks = GetParam();
  std::string error;
  auto daemon = DaemonProcess::start({}, &error);
  ASSERT_NE(daemon, nullptr) << error;
  auto job = RankJob::start(*daemon, "badargs", nranks,
                            {"--mode", "badargs", "--seed", "3", "--watchdog", "30"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectJobSucceeds(*job, *daemon, std::chrono::seconds(60));

  std::vector<std::string> checks = kRefusedChecks;
  for (int peer : {nranks, -1, 1 << 30}) {
    checks.push_back("send_peer_" + std::to_string(peer));
    checks.push_back("recv_peer_" + std::to_string(peer));
  }
  for (int r = 0; r < nranks; ++r) {
    const std::string out = job->rank(r).output();
    for (const std::string& name : checks) {
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + name);
      auto line = findStatusLine(out, "check " + name);
      ASSERT_TRUE(line.has_value()) << "no outcome printed";
      EXPECT_EQ(line->status, 3 /* HC_INVALID_ARGUMENT */) << line->text;
      EXPECT_FALSE(line->text.empty() || line->text == "(null)") << "refused without a message";
    }
    SCOPED_TRACE("rank " + std::to_string(r));
    auto pair = findStatusLine(out, "check self_pair_in_group");
    ASSERT_TRUE(pair.has_value());
    EXPECT_EQ(pair->status, 0) << pair->text;
    auto after = findStatusLine(out, "after");
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->status, 0) << after->text;
  }
  if (HasFailure()) ADD_FAILURE() << job->report() << "\n--- daemon:\n" << daemon->logTail();
  job.reset();
  EXPECT_EQ(daemon->stop(), 0) << daemon->logTail();
}

INSTANTIATE_TEST_SUITE_P(Ranks, BadArgsTest, ::testing::Values(1, 2, 3),
                         [](const auto& p) { return "ranks" + std::to_string(p.param); });

}  // namespace
}  // namespace hc::integ
