// FlightRecorder: record ids, PyTorch's sequence ids and names, states and times, each rank's
// progress, the bounded ring, and the JSON dump's field names.
#include "daemon/observe/flight_recorder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "daemon/observe/flight_json.h"

namespace hc::observe {
namespace {

FlightOp collective(int rank, uint64_t seq, const char* op = "allreduce") {
  FlightOp f;
  f.rank = rank;
  f.op = op;
  f.seq = seq;
  f.dtype = "bfloat16";
  f.inputSizes = f.outputSizes = {7};
  return f;
}

TEST(FlightRecorderTest, EntriesMoveFromScheduledToCompletedOrFailed) {
  FlightRecorder recorder(CommIdentity{.id = 3, .keyHex = "ab", .nranks = 4, .localRanks = {2, 0}}, 10);
  const uint64_t a = recorder.posted(collective(0, 0));
  const uint64_t b = recorder.posted(collective(2, 0));
  FlightOp send;
  send.rank = 2;
  send.op = "send";
  send.p2p = true;
  send.seq = 4;
  send.peer = 1;
  const uint64_t c = recorder.posted(send);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(c, 2u);
  recorder.started(b);
  ASSERT_TRUE(recorder.snapshot().ranks[1].lastPosted.has_value());
  EXPECT_EQ(recorder.snapshot().ranks[1].lastPosted->state, FlightState::Scheduled)
      << "rank 2 posted the send after b";
  recorder.started(a);
  EXPECT_EQ(recorder.snapshot().ranks[0].lastPosted->state, FlightState::Started);
  recorder.finished(a, okStatus());
  recorder.finished(c, unavailable("peer gone"));

  FlightSnapshot s = recorder.snapshot();
  ASSERT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.entries[0].collectiveSeqId, 1u);  // PyTorch counts from 1
  EXPECT_EQ(s.entries[0].profilingName, "nccl:all_reduce");
  EXPECT_EQ(s.entries[0].state, FlightState::Completed);
  EXPECT_GT(s.entries[0].timeDiscoveredStartedNs, 0);
  EXPECT_GE(s.entries[0].timeDiscoveredCompletedNs, s.entries[0].timeDiscoveredStartedNs);
  EXPECT_EQ(s.entries[1].state, FlightState::Started);
  EXPECT_GT(s.entries[1].timeDiscoveredStartedNs, 0);
  EXPECT_EQ(s.entries[2].p2pSeqId, 5u);
  EXPECT_EQ(s.entries[2].collectiveSeqId, 0u);
  EXPECT_EQ(s.entries[2].state, FlightState::Failed);
  EXPECT_NE(s.entries[2].error.find("peer gone"), std::string::npos);
  EXPECT_EQ(s.opsCompleted, 1u);
  EXPECT_EQ(s.opsFailed, 1u);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].rank, 0);
  EXPECT_EQ(s.ranks[0].collectivesPosted, 1u);
  EXPECT_EQ(s.ranks[0].collectivesFinished, 1u);
  EXPECT_EQ(s.ranks[1].rank, 2);
  EXPECT_EQ(s.ranks[1].transfersPosted, 1u);
  EXPECT_EQ(s.ranks[1].collectivesFinished, 0u);
  ASSERT_TRUE(s.ranks[1].lastPosted.has_value());
  EXPECT_EQ(s.ranks[1].lastPosted->profilingName, "nccl:send");
  EXPECT_EQ(s.ranks[1].lastPosted->state, FlightState::Failed);
}

TEST(FlightRecorderTest, KeepsTheLastEntriesPerLocalRankAndCountsEvictedOnes) {
  FlightRecorder recorder(CommIdentity{.id = 1, .keyHex = "k", .nranks = 2, .localRanks = {0, 1}}, 3);
  std::vector<uint64_t> ids;
  for (uint64_t seq = 0; seq < 5; ++seq) {
    ids.push_back(recorder.posted(collective(0, seq)));
    ids.push_back(recorder.posted(collective(1, seq)));
  }
  for (uint64_t id : ids) recorder.finished(id, okStatus());
  FlightSnapshot all = recorder.snapshot();
  ASSERT_EQ(all.entries.size(), 6u);  // 3 per local rank
  EXPECT_EQ(all.entries.front().recordId, 4u);
  EXPECT_EQ(all.entries.back().recordId, 9u);
  EXPECT_EQ(all.opsCompleted, 10u);
  EXPECT_EQ(recorder.snapshot(2).entries.size(), 2u);
  EXPECT_EQ(recorder.snapshot(2).entries.front().recordId, 8u);
}

TEST(FlightRecorderTest, CountsTheBytesOfCompletedOperationsOnly) {
  FlightRecorder recorder(CommIdentity{.id = 1, .keyHex = "k", .nranks = 2, .localRanks = {0}}, 8);
  FlightOp gather = collective(0, 0);
  gather.bytesIn = 64;
  gather.bytesOut = 128;  // the larger side counts, as nccl-tests' size
  FlightOp failed = collective(0, 1);
  failed.bytesIn = failed.bytesOut = 1000;
  FlightOp pending = collective(0, 2);
  pending.bytesIn = pending.bytesOut = 5000;
  recorder.finished(recorder.posted(gather), okStatus());
  recorder.finished(recorder.posted(failed), unavailable("peer gone"));
  (void)recorder.posted(pending);
  EXPECT_EQ(recorder.snapshot().bytesCompleted, 128u);
}

TEST(FlightJsonTest, DumpUsesPyTorchFieldNamesAndDtypes) {
  FlightRecorder recorder(CommIdentity{.id = 1, .keyHex = "00ff/3.1", .nranks = 2, .localRanks = {0}}, 8);
  recorder.started(recorder.posted(collective(0, 0, "reduce_scatter")));
  const std::string dir = ::testing::TempDir() + "/flight-json-test/state";
  std::filesystem::remove_all(dir);
  Result<std::string> path = dumpFlightRecord(dir, recorder.snapshot(), "late", "why");
  ASSERT_TRUE(path.isOk()) << path.status().toString();
  EXPECT_EQ(std::filesystem::path(path.value()).filename().string().rfind("flight-00ff-3.1-late-", 0), 0u);
  std::ifstream file(path.value());
  auto doc = nlohmann::json::parse(file);
  EXPECT_EQ(doc["reason"], "late");
  EXPECT_EQ(doc["comm"]["key"], "00ff/3.1");
  ASSERT_EQ(doc["entries"].size(), 1u);
  const auto& e = doc["entries"][0];
  EXPECT_EQ(e["profiling_name"], "nccl:reduce_scatter");
  EXPECT_EQ(e["collective_seq_id"], 1);
  EXPECT_EQ(e["input_sizes"], nlohmann::json::parse("[[7]]"));
  EXPECT_EQ(e["input_dtypes"], nlohmann::json::parse("[\"BFloat16\"]"));
  EXPECT_EQ(e["state"], "started");
  EXPECT_TRUE(e["time_discovered_completed_ns"].is_null());
  EXPECT_FALSE(std::filesystem::exists(path.value() + ".tmp"));
}

}  // namespace
}  // namespace hc::observe
