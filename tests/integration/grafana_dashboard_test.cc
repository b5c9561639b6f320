// The Grafana dashboard deploy/grafana/hetero-comm.json against what the daemon really exports.
// Grafana is not in Debian 12, so the test does what Grafana would: it checks that every panel
// asks the dashboard's Prometheus datasource for something, then has a real Prometheus (Debian's
// package, on a free loopback port) scrape two real daemons during real jobs, and asks it every
// panel's PromQL with the variables filled in as Grafana would with every daemon selected. Each
// must answer with data: a misspelt metric or label, or a panel over a series the daemon never
// exports, shows as an empty answer here rather than as an empty panel in production.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/integration/grafana_dashboard.h"
#include "tests/integration/multi_daemon.h"
#include "tests/integration/prometheus_process.h"

namespace hc::integ {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// What $__rate_interval stands for: wider than the whole test, so every rate spans every sample
// the jobs produced.
constexpr const char* kRateInterval = "1m";

const std::string kMetricsLogLine = "metrics listening on http://127.0.0.1:";

json dashboard() { return loadDashboard(HC_GRAFANA_DASHBOARD_PATH); }

TEST(GrafanaDashboardTest, EveryPanelAsksThePrometheusDatasourceForAnExpression) {
  const json d = dashboard();
  ASSERT_FALSE(d.is_discarded()) << HC_GRAFANA_DASHBOARD_PATH << " is not JSON";
  EXPECT_GE(d.value("schemaVersion", 0), 36) << "older than Grafana 9's format";
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_FALSE(dataPanels(d).empty());
  for (const std::string& problem : dashboardProblems(d)) ADD_FAILURE() << problem;
  std::vector<std::string> problems;
  EXPECT_FALSE(variableQueries(d, &problems).empty());
  for (const std::string& problem : problems) ADD_FAILURE() << problem;
}

// Both daemons have a sim GPU; daemon 0's transport takes its memory in place (device-direct),
// daemon 1's stages through host memory, so the device-direct and staging series exist.
ClusterOptions clusterWithSimDevices() {
  ClusterOptions options;
  options.daemons = 2;
  for (const char* setting :
       {"metrics.listen=127.0.0.1:0", "devices.sim.nvidia=1", "devices.sim.copy_gbps=1"}) {
    options.daemonArgs.insert(options.daemonArgs.end(), {"--set", setting});
  }
  options.perDaemonArgs = [](int d) -> std::vector<std::string> {
    return {"--set", d == 0 ? "devices.sim.nic_direct=true" : "devices.sim.nic_direct=false"};
  };
  return options;
}

// One round of work that touches every panel: allreduces across both daemons (ucx, peers up)
// and on daemon 0 alone (shm, a larger size class), and device-memory sends and receives
// between the daemons (in place out of and into daemon 0, staged on daemon 1).
void runJobs(DaemonCluster& cluster) {
  std::string error;
  auto across =
      ClusterJob::start(cluster, "across", {0, 0, 1, 1},
                        {"--mode", "deviceops", "--count", "4096", "--iters", "4"}, &error);
  ASSERT_NE(across, nullptr) << error;
  auto local =
      ClusterJob::start(cluster, "local", {0, 0},
                        {"--mode", "deviceops", "--count", "300000", "--iters", "3"}, &error);
  ASSERT_NE(local, nullptr) << error;
  auto device = ClusterJob::start(cluster, "device", {0, 1},
                                  {"--mode", "devicesendrecv", "--count", "262144", "--iters", "4"},
                                  &error, [](int) {
                                    return std::vector<std::string>{"--device", "sim:nvidia:0"};
                                  });
  ASSERT_NE(device, nullptr) << error;
  for (ClusterJob* job : {across.get(), local.get(), device.get()}) {
    expectClusterJobSucceeds(*job, cluster, seconds(30));
  }
}

// Asks Prometheus q's PromQL, variables filled in; a failure when the answer is an error or
// empty.
void expectData(const PrometheusProcess& prometheus, const DashboardQuery& q,
                const VariableValues& values, const std::string& context) {
  std::string promql, unknown, error;
  ASSERT_TRUE(substituteVariables(q.expr, values, &promql, &unknown))
      << q.where << " " << q.refId << ": no value for " << unknown << " in " << q.expr;
  json result;
  ASSERT_TRUE(prometheus.query(promql, &result, &error)) << q.where << ": " << promql << "\n"
                                                         << error;
  EXPECT_FALSE(result.empty()) << q.where << " " << q.refId << " has no data: " << promql << "\n"
                               << context;
}

TEST(GrafanaDashboardTest, EveryQueryAnswersWithDataAfterAJob) {
  if (::access(PrometheusProcess::kBinary, X_OK) != 0) {
    GTEST_SKIP() << "no " << PrometheusProcess::kBinary << " (Debian package prometheus)";
  }
  const json d = dashboard();
  ASSERT_FALSE(d.is_discarded()) << HC_GRAFANA_DASHBOARD_PATH << " is not JSON";
  std::string error;
  auto cluster = DaemonCluster::start(clusterWithSimDevices(), &error);
  ASSERT_NE(cluster, nullptr) << error;
  std::vector<std::string> targets;
  for (int i = 0; i < cluster->size(); ++i) {
    const int port = loggedPort(cluster->daemon(i), kMetricsLogLine);
    ASSERT_NE(port, 0) << cluster->logTails();
    targets.push_back("127.0.0.1:" + std::to_string(port));
  }
  auto prometheus = PrometheusProcess::start(targets, &error);
  ASSERT_NE(prometheus, nullptr) << error;

  // Two rounds with a scrape of both daemons after each: every counter the first round creates
  // has a sample before the second round adds to it, so its rate is above zero, as on a live
  // cluster (a counter's first sample alone gives no rate).
  for (int round = 0; round < 2; ++round) {
    ASSERT_NO_FATAL_FAILURE(runJobs(*cluster));
    ASSERT_TRUE(prometheus->waitForScrapesAfter(std::chrono::system_clock::now(), cluster->size(),
                                                seconds(20), &error))
        << error << "\n"
        << prometheus->log();
  }

  const VariableValues values = allSelected(d, kRateInterval);
  const std::string context = "prometheus log:\n" + prometheus->log();
  std::vector<std::string> problems;
  std::vector<DashboardQuery> queries = variableQueries(d, &problems);
  const std::vector<DashboardQuery> panels = panelQueries(d);
  queries.insert(queries.end(), panels.begin(), panels.end());
  for (const DashboardQuery& q : queries) expectData(*prometheus, q, values, context);
  // A name under "or vector(0)" answers even when misspelt: each must be a series seen.
  for (const DashboardQuery& q : panels) {
    for (const std::string& name : metricNames(q.expr)) {
      expectData(*prometheus, {q.where, name, "count({__name__=\"" + name + "\"})"}, values,
                 context);
    }
  }

  prometheus.reset();
  for (int i = 0; i < cluster->size(); ++i) {
    EXPECT_EQ(cluster->daemon(i).stop(), 0) << "daemon " << i << "\n" << cluster->logTails();
  }
}

}  // namespace
}  // namespace hc::integ
