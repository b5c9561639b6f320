// Reading a daemon's Prometheus endpoint in tests: one GET /metrics, and one sample from it.
#pragma once

#include <string>

namespace hc::integ {

// GET /metrics from 127.0.0.1:`port` over a plain socket (5 s timeout); "" on failure.
std::string scrapeMetrics(int port);

// The value of the sample named exactly `series` (name and labels as printed); -1 when absent.
double metricSample(const std::string& text, const std::string& series);

}  // namespace hc::integ
