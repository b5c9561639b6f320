#include "tests/integration/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hc::integ {
namespace {

// Owns one socket for the length of a request.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) return;
    const timeval limit{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) == 0;
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool sendAll(std::string_view bytes) {
    while (connected_ && !bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return connected_;
  }
  // Everything up to the server's close (or a read that timed out).
  std::string receiveAll() {
    std::string out;
    char chunk[8192];
    for (ssize_t n; (n = ::recv(fd_, chunk, sizeof(chunk), 0)) > 0;) out.append(chunk, n);
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace

HttpResponse httpGet(int port, std::string_view target) {
  Connection connection(port);
  const std::string request = "GET " + std::string(target) + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (!connection.sendAll(request)) return {};
  const std::string raw = connection.receiveAll();
  // "HTTP/1.x NNN reason", headers, a blank line, the body.
  HttpResponse response;
  const size_t headersEnd = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.") || raw.size() < 12 || headersEnd == std::string::npos) return {};
  response.status = std::atoi(raw.c_str() + 9);
  response.body = raw.substr(headersEnd + 4);
  return response;
}

std::string urlEncode(std::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      out += escaped;
    }
  }
  return out;
}

}  // namespace hc::integ
