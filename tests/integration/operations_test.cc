// What an operator asks of a stuck multi-node job, against real daemons and rank workers: rank 3
// stops posting, and then
//   - hcctl trace, on either daemon, names rank 3 as the one that has not posted the collective
//     the others wait on (gathered from both daemons over Peer.GetCommProgress);
//   - hcctl comms and clients list the communicator and the workers;
//   - each daemon dumps the flight record to its state directory once comm.late_report_ms
//     passes, with PyTorch's field names, and again when the job is killed;
//   - /metrics parses and counts the collectives that ran;
//   - when daemon 1 dies, daemon 0 dumps the record again and reports the peer down (Peers
//     health NOT_SERVING, hetero_comm_peer_up 0);
// and that a client which aborts its communicator is not its daemon going away.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/integration/hcctl_run.h"
#include "tests/integration/metrics_scrape.h"
#include "tests/integration/multi_daemon.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

json hcctlJson(const std::vector<std::string>& args, const std::string& dir) {
  HcctlRun run = hcctl(args, dir);
  EXPECT_EQ(run.exitCode, 0) << run.output;
  json parsed = json::parse(run.output, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << run.output;
  return parsed;
}

std::vector<int> ints(const json& array) {
  std::vector<int> out;
  if (array.is_array()) {
    for (const json& v : array) out.push_back(v.get<int>());
  }
  return out;
}

std::vector<std::filesystem::path> dumps(const std::string& dir, const std::string& reason) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find("-" + reason + "-") != std::string::npos && name.ends_with(".json")) {
      out.push_back(entry.path());
    }
  }
  return out;
}

std::vector<std::filesystem::path> waitForDumps(const std::string& dir, const std::string& reason,
                                                seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto found = dumps(dir, reason);
    if (!found.empty() || std::chrono::steady_clock::now() > end) return found;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

class StuckJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::makeTempDir("hc-ops");
    ASSERT_FALSE(dir_.empty());
    ClusterOptions options;
    options.daemonArgs = {"--set", "comm.late_report_ms=1500", "--set",
                          "metrics.listen=127.0.0.1:0"};
    options.perDaemonArgs = [this](int d) -> std::vector<std::string> {
      return {"--set", "server.state_dir=" + stateDir(d)};
    };
    std::string error;
    cluster_ = DaemonCluster::start(options, &error);
    ASSERT_NE(cluster_, nullptr) << error;
    // Ranks 0, 1 on daemon 0 and 2, 3 on daemon 1. Each loop iteration is an allreduce and a
    // broadcast; rank 3 posts the allreduce of iteration 3 and stops, so the others wait in
    // collective 6, the broadcast of iteration 3.
    job_ = ClusterJob::start(*cluster_, "stuck", {0, 0, 1, 1}, {"--mode", "loop", "--count", "1024"},
                             &error, [](int rank) -> std::vector<std::string> {
                               if (rank == 3) return {"--mode", "hang", "--stall-after", "3"};
                               return {};
                             });
    ASSERT_NE(job_, nullptr) << error;
    ASSERT_TRUE(job_->proc(3).waitForOutput("stalled", seconds(30))) << job_->report();
  }

  void TearDown() override {
    job_.reset();
    cluster_.reset();
    test::removeTempDir(dir_);
  }

  std::string stateDir(int d) const { return dir_ + "/state-" + std::to_string(d); }
  std::string admin(int d) { return cluster_->daemon(d).dir() + "/run/hetero-commd-admin.sock"; }

  std::string dir_;
  std::unique_ptr<DaemonCluster> cluster_;
  std::unique_ptr<ClusterJob> job_;
};

TEST_F(StuckJobTest, TraceCommsClientsDumpsAndMetricsNameTheRankThatStopped) {
  // hcctl comms: the communicator, as daemon 1 holds it.
  json comms = hcctlJson({"--socket", admin(1), "comms", "--json"}, dir_);
  ASSERT_EQ(comms["communicators"].size(), 1u) << comms.dump(1);
  const json& comm = comms["communicators"][0];
  const std::string key = comm["key"];
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(comm["nranks"], 4);
  EXPECT_EQ(ints(comm["local_ranks"]), (std::vector<int>{2, 3}));
  EXPECT_EQ(comm["nodes"], 2);
  EXPECT_EQ(comm["state"], "active");

  // hcctl trace, asked of either daemon, gathers both daemons' ranks.
  for (int d : {0, 1}) {
    SCOPED_TRACE("trace asked of daemon " + std::to_string(d));
    json trace = hcctlJson({"--socket", admin(d), "trace", key.substr(0, 8), "--json"}, dir_);
    EXPECT_EQ(trace["key"], key);
    EXPECT_EQ(ints(trace["missing"]), (std::vector<int>{3})) << trace.dump(1);
    EXPECT_EQ(ints(trace["posted"]), (std::vector<int>{0, 1, 2})) << trace.dump(1);
    EXPECT_TRUE(ints(trace["unknown"]).empty()) << trace.dump(1);
    EXPECT_EQ(trace["waiting_collective_seq_id"], "6") << trace.dump(1);  // uint64 as a string
    EXPECT_EQ(trace["waiting_profiling_name"], "nccl:broadcast") << trace.dump(1);
    ASSERT_EQ(trace["nodes"].size(), 2u);
    // Rank 3 (daemon 1) last posted the allreduce of iteration 3, and it finished.
    bool sawRank3 = false;
    for (const json& rank : trace["nodes"][1]["ranks"]) {
      if (rank["rank"] != 3) continue;
      sawRank3 = true;
      EXPECT_EQ(rank["last_posted"]["profiling_name"], "nccl:all_reduce") << rank.dump();
      EXPECT_EQ(rank["last_posted"]["state"], "completed") << rank.dump();
    }
    EXPECT_TRUE(sawRank3) << trace.dump(1);
    HcctlRun text = hcctl({"--socket", admin(d), "trace", key}, dir_);
    EXPECT_EQ(text.exitCode, 0);
    EXPECT_NE(text.output.find("ranks 3 have not posted it"), std::string::npos) << text.output;
  }

  // hcctl clients: the two workers on daemon 0, each holding the communicator.
  json clients = hcctlJson({"--socket", admin(0), "clients", "--json"}, dir_);
  ASSERT_EQ(clients["clients"].size(), 2u) << clients.dump(1);
  std::set<int> pids;
  for (const json& c : clients["clients"]) {
    pids.insert(c["pid"].get<int>());
    EXPECT_EQ(c["communicators"].size(), 1u);
  }
  std::set<int> workers;
  for (int i : job_->onDaemon(0)) workers.insert(job_->proc(i).pid());
  EXPECT_EQ(pids, workers);

  // The late report: daemon 1 waits for rank 3 locally; daemon 0's ranks posted and wait for
  // daemon 1. Both dump, naming what they know.
  for (int d : {0, 1}) {
    SCOPED_TRACE("state directory of daemon " + std::to_string(d));
    auto late = waitForDumps(stateDir(d), "late", seconds(15));
    ASSERT_EQ(late.size(), 1u) << cluster_->logTails();
    std::ifstream file(late[0]);
    json dump = json::parse(file, nullptr, false);
    ASSERT_FALSE(dump.is_discarded());
    EXPECT_EQ(dump["reason"], "late");
    EXPECT_EQ(dump["comm"]["key"], key);
    const std::string detail = dump["detail"];
    if (d == 1) {
      EXPECT_NE(detail.find("ranks 3 did not post it"), std::string::npos) << detail;
    } else {
      EXPECT_NE(detail.find("wait for other daemons"), std::string::npos) << detail;
    }
    // The last entry of each local rank that posted collective 6 is that broadcast, not done.
    bool sawWaiting = false;
    for (const json& e : dump["entries"]) {
      for (const char* field : {"record_id", "collective_seq_id", "p2p_seq_id", "profiling_name",
                                "time_created_ns", "input_sizes", "input_dtypes", "output_sizes",
                                "output_dtypes", "state", "time_discovered_started_ns",
                                "time_discovered_completed_ns"}) {
        EXPECT_TRUE(e.contains(field)) << field;
      }
      if (e["collective_seq_id"] == 6) {
        sawWaiting = true;
        EXPECT_EQ(e["profiling_name"], "nccl:broadcast");
        EXPECT_NE(e["state"], "completed");
        EXPECT_NE(e["rank"], 3);
      }
      if (e["collective_seq_id"] == 5) {
        EXPECT_EQ(e["state"], "completed") << e.dump();
      }
    }
    EXPECT_TRUE(sawWaiting) << dump.dump(1);
  }

  // /metrics on daemon 0: its two ranks finished allreduces 1-3 and broadcasts 1-2 (int32).
  const int port = loggedPort(cluster_->daemon(0), "metrics listening on http://127.0.0.1:");
  ASSERT_NE(port, 0) << cluster_->daemon(0).logTail();
  const std::string metrics = scrapeMetrics(port);
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metricSample(metrics, "hetero_comm_collectives_total{op=\"allreduce\",dtype=\"int32\","
                            "status=\"ok\"}"),
            6)
      << metrics;
  EXPECT_EQ(metricSample(metrics, "hetero_comm_collectives_total{op=\"broadcast\",dtype=\"int32\","
                            "status=\"ok\"}"),
            4)
      << metrics;
  EXPECT_EQ(metricSample(metrics, "hetero_comm_clients"), 2) << metrics;
  EXPECT_GT(metricSample(metrics, "hetero_comm_bytes_total{direction=\"sent\",transport=\"ucx\"}"), 0)
      << metrics;
  EXPECT_NE(metrics.find("hetero_comm_build_info{"), std::string::npos);

  const std::string peerOne = comm["node_addresses"][1];
  EXPECT_EQ(metricSample(metrics, "hetero_comm_peer_up{peer=\"" + peerOne + "\"}"), 1) << metrics;
  const std::string self = comm["node_addresses"][0];
  EXPECT_EQ(metricSample(metrics, "hetero_comm_peer_up{peer=\"" + self + "\"}"), -1)
      << "a daemon is not its own peer\n" << metrics;
  HcctlRun peers = hcctl({"--socket", admin(0), "health", "--service", "hetero_comm.v1.Peers"}, dir_);
  EXPECT_EQ(peers.exitCode, 0) << peers.output;

  // Daemon 1 dies: daemon 0 fails the communicator with work outstanding and dumps again, its
  // Peers health goes NOT_SERVING and peer_up drops to 0.
  cluster_->daemon(1).kill9();
  auto failed = waitForDumps(stateDir(0), "failed", seconds(15));
  EXPECT_EQ(failed.size(), 1u) << cluster_->logTails();
  int peersExit = -1;
  for (int i = 0; i < 100 && peersExit != 4; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    peersExit = hcctl({"--socket", admin(0), "health", "--service", "hetero_comm.v1.Peers"}, dir_)
                    .exitCode;
  }
  EXPECT_EQ(peersExit, 4) << cluster_->logTails();
  EXPECT_EQ(metricSample(scrapeMetrics(port), "hetero_comm_peer_up{peer=\"" + peerOne + "\"}"), 0);
  EXPECT_EQ(hcctl({"--socket", admin(0), "health"}, dir_).exitCode, 0) << "the daemon itself serves";
}

// A rank aborts a communicator that spans two daemons while the other waits on it: the waiting
// rank's operation fails, and its daemon keeps counting the aborting rank's daemon up (Peers
// health SERVING, no hetero_comm_peer_up sample at 0): the abort's failure notices come from a
// daemon that is alive, which only a transport failure may say otherwise of.
TEST(PeerHealthTest, AClientThatAbortsLeavesItsDaemonUpForTheOthers) {
  const std::string dir = test::makeTempDir("hc-ops-abort");
  ASSERT_FALSE(dir.empty());
  ClusterOptions options;
  options.daemonArgs = {"--set", "metrics.listen=127.0.0.1:0"};
  std::string error;
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  const std::string goFile = dir + "/go";
  // Rank 1 never posts; it aborts once the go file appears, while rank 0 waits in a group of
  // transfers with it.
  auto job = ClusterJob::start(*cluster, "abort", {0, 1},
                               {"--mode", "abort", "--phase", "group", "--go-file", goFile,
                                "--aborter", "1", "--watchdog", "30"},
                               &error);
  ASSERT_NE(job, nullptr) << error;
  ASSERT_TRUE(job->proc(0).waitForOutput("posted", seconds(20))) << job->report();
  ASSERT_TRUE(job->proc(1).waitForOutput("idle", seconds(20))) << job->report();
  std::this_thread::sleep_for(milliseconds(300));
  std::ofstream(goFile).put('\n');
  ASSERT_TRUE(job->proc(1).waitForOutput("aborted status=0", seconds(10))) << job->report();
  ASSERT_TRUE(job->proc(0).waitForOutput("result status=", seconds(10)))
      << job->report() << cluster->logTails();
  ASSERT_TRUE(job->waitAll(seconds(20))) << job->report();

  const std::string admin = cluster->daemon(0).dir() + "/run/hetero-commd-admin.sock";
  HcctlRun peers = hcctl({"--socket", admin, "health", "--service", "hetero_comm.v1.Peers"}, dir);
  EXPECT_EQ(peers.exitCode, 0) << peers.output << cluster->logTails();
  const int port = loggedPort(cluster->daemon(0), "metrics listening on http://127.0.0.1:");
  ASSERT_NE(port, 0) << cluster->daemon(0).logTail();
  std::istringstream metrics(scrapeMetrics(port));
  int samples = 0;
  for (std::string line; std::getline(metrics, line);) {
    if (line.rfind("hetero_comm_peer_up{", 0) != 0) continue;
    ++samples;
    EXPECT_EQ(line.substr(line.rfind(' ') + 1), "1") << line;
  }
  EXPECT_GT(samples, 0) << "daemon 0 names no peer";
  cluster.reset();
  test::removeTempDir(dir);
}

}  // namespace
}  // namespace hc::integ
