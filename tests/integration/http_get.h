// A plain HTTP GET to a loopback server, for tests that talk to a local HTTP API (Prometheus'
// /api/v1/query). HTTP/1.0, so the server ends the body by closing the connection and never
// chunks it: no HTTP library needed.
#pragma once

#include <string>
#include <string_view>

namespace hc::integ {

struct HttpResponse {
  int status = 0;  // 0: no answer (refused, timed out, or not HTTP)
  std::string body;
};

// GET `target` (path and query, already encoded) from 127.0.0.1:port, waiting at most 5 s for
// each read.
HttpResponse httpGet(int port, std::string_view target);

// `text` as a URL query value: every byte other than A-Z a-z 0-9 - _ . ~ as %XX.
std::string urlEncode(std::string_view text);

}  // namespace hc::integ
