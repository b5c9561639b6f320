// traceVerdict: the first collective some rank has not finished, and who has not posted it.
#include "daemon/control/comm_trace.h"

#include <gtest/gtest.h>

namespace hc::control {
namespace {

observe::RankProgress progress(int rank, uint64_t posted, uint64_t finished) {
  observe::RankProgress p;
  p.rank = rank;
  p.collectivesPosted = posted;
  p.collectivesFinished = finished;
  if (posted > 0) {
    observe::FlightEntry last;
    last.collectiveSeqId = posted;
    last.profilingName = posted % 2 == 0 ? "nccl:broadcast" : "nccl:all_reduce";
    p.lastPosted = last;
  }
  return p;
}

std::vector<int> list(const google::protobuf::RepeatedField<int32_t>& r) { return {r.begin(), r.end()}; }

TEST(CommTraceTest, NamesTheRanksThatHaveNotPostedTheCollectiveOthersWaitOn) {
  // Ranks 0-2 posted 6 collectives and finished 5; rank 3 posted 5: all wait in collective 6.
  std::vector<NodeReport> nodes = {
      {"a:1", okStatus(), {progress(0, 6, 5), progress(1, 6, 5)}},
      {"b:1", okStatus(), {progress(2, 6, 5), progress(3, 5, 5)}},
  };
  hetero_comm::v1::TraceCommunicatorResponse out;
  traceVerdict(4, nodes, &out);
  EXPECT_EQ(out.waiting_collective_seq_id(), 6u);
  EXPECT_EQ(out.waiting_profiling_name(), "nccl:broadcast");
  EXPECT_EQ(list(out.posted()), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(list(out.missing()), (std::vector<int>{3}));
  EXPECT_TRUE(out.unknown().empty());
  EXPECT_NE(out.summary().find("ranks 3 have not posted it"), std::string::npos) << out.summary();
  EXPECT_EQ(out.nodes_size(), 2);
}

TEST(CommTraceTest, UnreachableDaemonsMakeTheirRanksUnknown) {
  std::vector<NodeReport> nodes = {
      {"a:1", okStatus(), {progress(0, 3, 2)}},
      {"b:1", unavailable("connection refused"), {}},
  };
  hetero_comm::v1::TraceCommunicatorResponse out;
  traceVerdict(2, nodes, &out);
  EXPECT_EQ(out.waiting_collective_seq_id(), 3u);
  EXPECT_EQ(list(out.posted()), (std::vector<int>{0}));
  EXPECT_TRUE(out.missing().empty());
  EXPECT_EQ(list(out.unknown()), (std::vector<int>{1}));
  EXPECT_FALSE(out.nodes(1).reachable());
  EXPECT_NE(out.nodes(1).error().find("connection refused"), std::string::npos);
}

TEST(CommTraceTest, NothingWaitsWhenEveryPostedCollectiveFinished) {
  std::vector<NodeReport> nodes = {{"", okStatus(), {progress(0, 4, 4), progress(1, 4, 4)}}};
  hetero_comm::v1::TraceCommunicatorResponse out;
  traceVerdict(2, nodes, &out);
  EXPECT_EQ(out.waiting_collective_seq_id(), 0u);
  EXPECT_TRUE(out.posted().empty());
  EXPECT_TRUE(out.missing().empty());
  EXPECT_NE(out.summary().find("no collective is waiting"), std::string::npos);
}

}  // namespace
}  // namespace hc::control
