#include "tests/unit/daemon/metrics/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hc::metrics::testing {
namespace {

std::string lowerCase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string errnoText(std::string_view what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Splits the raw bytes into status line, headers and body. A response to HEAD has no body, and
// its Content-Length describes the body a GET would have had.
std::string parseResponse(std::string_view raw, bool isHead, HttpResponse* out) {
  const size_t headerEnd = raw.find("\r\n\r\n");
  if (headerEnd == std::string_view::npos) return "no end of headers in the response";
  std::string_view head = raw.substr(0, headerEnd);
  out->body = std::string(raw.substr(headerEnd + 4));
  size_t eol = head.find("\r\n");
  out->statusLine = std::string(head.substr(0, eol));
  if (!out->statusLine.starts_with("HTTP/1.1 ") || out->statusLine.size() < 12) {
    return "bad status line '" + out->statusLine + "'";
  }
  out->status = std::atoi(out->statusLine.c_str() + 9);
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return "bad header line '" + std::string(line) + "'";
    out->headers[lowerCase(trim(line.substr(0, colon)))] =
        std::string(trim(line.substr(colon + 1)));
  }
  const auto length = out->headers.find("content-length");
  if (length != out->headers.end() && !isHead && std::stoul(length->second) != out->body.size()) {
    return "body has " + std::to_string(out->body.size()) + " bytes, Content-Length says " +
           length->second;
  }
  return "";
}

}  // namespace

std::string httpRequest(int port, std::string_view method, std::string_view path,
                        HttpResponse* out) {
  *out = HttpResponse{};
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errnoText("socket");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return errnoText("connect");
  }
  const std::string request = std::string(method) + " " + std::string(path) +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return errnoText("send");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) return errnoText("recv (the server did not close the connection?)");
    raw.append(buf, static_cast<size_t>(n));
  }
  return parseResponse(raw, method == "HEAD", out);
}

}  // namespace hc::metrics::testing
