// PrometheusProcess: Debian's Prometheus server for one test, on a free loopback port, with its
// own configuration and storage in a private temporary folder, scraping the given targets every
// second. Tests ask it PromQL over its HTTP API, as Grafana would.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/child_process.h"

namespace hc::integ {

class PrometheusProcess {
 public:
  // The Debian package's server; tests skip when it is missing.
  static constexpr const char* kBinary = "/usr/bin/prometheus";
  // The scrape job's name, the `job` label of every series it scrapes.
  static constexpr const char* kJob = "hetero-comm";

  // Starts the server scraping `targets` ("127.0.0.1:PORT", path /metrics) and waits until it
  // reports ready (at most 20 s). Null with *error, including the server's log, on failure.
  static std::unique_ptr<PrometheusProcess> start(const std::vector<std::string>& targets,
                                                  std::string* error);
  // SIGTERM, so the server shuts down its storage, then the folder goes; a server that has not
  // ended within 5 s is killed.
  ~PrometheusProcess();
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  int port() const { return port_; }

  // An instant query at the present moment (/api/v1/query). On success, the "result" member of
  // the answer's data (an array for vector and matrix results); false with *error otherwise.
  bool query(const std::string& promql, nlohmann::json* result, std::string* error) const;
  // Waits until each of `targets` scrape targets was scraped successfully at or after `since`:
  // what they exported by then is in the server. The first scrape comes up to about 5 s after
  // start (Prometheus hands new targets to its scrapers at that pace). False at the timeout,
  // with *error.
  bool waitForScrapesAfter(std::chrono::system_clock::time_point since, int targets,
                           std::chrono::milliseconds timeout, std::string* error) const;
  // The server's log, to attach to a failure (short: it logs warnings and errors only).
  std::string log() const { return process_ ? process_->output() : ""; }

 private:
  PrometheusProcess() = default;
  // One try on one port; false when the server ended before it was ready (the port may have
  // been taken in between) or did not get ready in time.
  bool launch(int port, std::string* error);

  std::string dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace hc::integ
