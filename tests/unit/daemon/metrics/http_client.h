// A minimal HTTP/1.1 client over a plain POSIX socket, for the metrics endpoint's tests: one
// request with "Connection: close", read to end of stream. Shares no code with civetweb.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace hc::metrics::testing {

struct HttpResponse {
  std::string statusLine;                      // "HTTP/1.1 200 OK"
  int status = 0;                              // 200
  std::map<std::string, std::string> headers;  // names in lower case, values trimmed
  std::string body;
};

// Sends `method path` to 127.0.0.1:port and reads the whole response (5 s timeouts on every
// socket call, so a server that never answers fails the test instead of hanging it).
// Returns "" on success, else what went wrong; checks that the body matches Content-Length.
std::string httpRequest(int port, std::string_view method, std::string_view path,
                        HttpResponse* out);

}  // namespace hc::metrics::testing
