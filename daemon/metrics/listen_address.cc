#include "daemon/metrics/listen_address.h"

#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

namespace hc::metrics {

Result<ListenAddress> parseListenAddress(std::string_view listen, bool ipv6Available) {
  auto bad = [&](std::string_view why) {
    return invalidArgument("metrics listen address '" + std::string(listen) +
                           "': " + std::string(why));
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) return bad("expected host:port");
  const std::string_view host = listen.substr(0, colon);
  const std::string_view portText = listen.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || ec != std::errc() || end != portText.data() + portText.size() ||
      port < 0 || port > 65535) {
    return bad("port must be a number in 0..65535");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string_view v6 = host.substr(1, host.size() - 2);
    const bool v6Chars = !v6.empty() && std::all_of(v6.begin(), v6.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
    });
    if (!v6Chars) return bad("bad IPv6 address");
    if (!ipv6Available) {
      return bad(
          "this system's civetweb (libcivetweb1) is built without IPv6; listen on an "
          "IPv4 address such as 127.0.0.1");
    }
  } else {
    const bool hostChars = !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
    });
    if (!hostChars) return bad("bad host (IPv6 needs brackets)");
  }
  return ListenAddress{std::string(host), port};
}

std::optional<SocketAddress> localAddressOf(const std::string& host, int port) {
  const bool v6 = host.size() >= 2 && host.front() == '[';
  std::string name = v6 ? host.substr(1, host.size() - 2) : host;
  // A wildcard listener accepts on every local address; loopback is the one always there.
  if (name == "0.0.0.0") name = "127.0.0.1";
  if (v6 && std::all_of(name.begin(), name.end(), [](char c) { return c == ':' || c == '0'; })) {
    name = "::1";
  }
  addrinfo hints{};
  hints.ai_family = v6 ? AF_INET6 : AF_INET;  // civetweb binds a name's IPv4 address
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return std::nullopt;
  }
  SocketAddress out;
  out.length = found->ai_addrlen;
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  return out;
}

bool connectAndClose(const SocketAddress& address) {
  const int fd = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool connected =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) == 0;
  ::close(fd);
  return connected;
}

}  // namespace hc::metrics
