#include "tests/integration/prometheus_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "tests/integration/http_get.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kReadyTimeout = std::chrono::seconds(20);
constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr int kPortTries = 3;

// A loopback port nobody listens on now. Prometheus cannot report the port it got for :0, so
// the test picks one; launch() tries again when another process takes it first.
int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// Scrapes every second (the dashboard's rates need several samples within a short test), with
// a timeout under the interval as Prometheus requires.
std::string scrapeConfig(const std::vector<std::string>& targets) {
  std::string list;
  for (const std::string& t : targets) list += (list.empty() ? "'" : ", '") + t + "'";
  return std::string("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n") +
         "  evaluation_interval: 1s\nscrape_configs:\n  - job_name: " + PrometheusProcess::kJob +
         "\n    static_configs:\n      - targets: [" + list + "]\n";
}

}  // namespace

std::unique_ptr<PrometheusProcess> PrometheusProcess::start(const std::vector<std::string>& targets,
                                                            std::string* error) {
  std::unique_ptr<PrometheusProcess> p(new PrometheusProcess());
  p->dir_ = test::makeTempDir("hc-prometheus");
  if (p->dir_.empty()) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  std::ofstream(p->dir_ + "/prometheus.yml") << scrapeConfig(targets);
  for (int attempt = 0; attempt < kPortTries; ++attempt) {
    if (p->launch(freeLoopbackPort(), error)) return p;
  }
  return nullptr;
}

bool PrometheusProcess::launch(int port, std::string* error) {
  process_.reset();
  port_ = port;
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  // Storage in a fresh folder per try: a server that failed may have left a lock behind.
  const std::string storage = dir_ + "/data-" + std::to_string(port);
  process_ = ChildProcess::spawn(
      {kBinary, "--config.file=" + dir_ + "/prometheus.yml", "--storage.tsdb.path=" + storage,
       "--web.listen-address=" + listen, "--log.level=warn"},
      {}, dir_ + "/prometheus-" + std::to_string(port) + ".log", error);
  if (!process_) return false;
  const auto deadline = Clock::now() + kReadyTimeout;
  while (Clock::now() < deadline) {
    if (httpGet(port, "/-/ready").status == 200) return true;
    if (process_->poll()) {
      *error =
          "prometheus on " + listen + " ended (" + process_->describeEnd() + "); log:\n" + log();
      return false;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  *error = "prometheus on " + listen + " not ready within 20 s; log:\n" + log();
  return false;
}

PrometheusProcess::~PrometheusProcess() {
  if (process_ && !process_->poll()) {
    process_->sendSignal(SIGTERM);
    (void)process_->waitExit(std::chrono::seconds(5));
  }
  process_.reset();  // kills and reaps a server still running
  test::removeTempDir(dir_);
}

bool PrometheusProcess::query(const std::string& promql, nlohmann::json* result,
                              std::string* error) const {
  const HttpResponse response = httpGet(port_, "/api/v1/query?query=" + urlEncode(promql));
  const nlohmann::json answer = nlohmann::json::parse(response.body, nullptr, false);
  // Errors come back as 400/422 with {"status":"error","error":"..."}.
  if (answer.is_discarded() || answer.value("status", "") != "success") {
    *error = "HTTP " + std::to_string(response.status) + ": " + response.body;
    return false;
  }
  *result = answer.value("data", nlohmann::json::object()).value("result", nlohmann::json::array());
  return true;
}

bool PrometheusProcess::waitForScrapesAfter(std::chrono::system_clock::time_point since,
                                            int targets, std::chrono::milliseconds timeout,
                                            std::string* error) const {
  const double sinceSeconds = std::chrono::duration<double>(since.time_since_epoch()).count();
  // timestamp() of `up` is the start of each target's last scrape. It must apply to the
  // selector itself: of any other expression it gives the evaluation time.
  const std::string up = "up{job=\"" + std::string(kJob) + "\"}";
  const std::string promql = "count((timestamp(" + up + ") >= " + std::to_string(sinceSeconds) +
                             ") and (" + up + " == 1))";
  const auto deadline = Clock::now() + timeout;
  nlohmann::json result;
  for (;;) {
    if (!query(promql, &result, error)) return false;
    if (!result.empty() && result[0]["value"][1] == std::to_string(targets)) return true;
    if (Clock::now() >= deadline) {
      *error = "not every target scraped within the timeout: " + promql + " -> " + result.dump();
      return false;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace hc::integ
