// The metrics listener's address: parsing "host:port" / "[v6]:port", and the socket address a
// local connection reaches the bound listener at (MetricsServer uses it to wake civetweb's
// listener thread on shutdown).
// Depends on hc_common and POSIX sockets only.
#pragma once

#include <sys/socket.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hc::metrics {

struct ListenAddress {
  std::string host;  // as written; IPv6 with its brackets
  int port = 0;      // 0: any free port
};

// "host:port" or "[v6]:port", host a name or address in [A-Za-z0-9._-] (v6: hex digits, ':' and
// '.'), port 0..65535. Strict on purpose: civetweb's listening_ports also reads lists ("a,b"),
// suffixes ("9410s" for TLS) and a bare port (all interfaces), none of which a metrics address
// should turn into by accident. `ipv6Available` false turns a "[v6]:port" into an error that says
// so. Errors are InvalidArgument naming the address and what is wrong with it.
Result<ListenAddress> parseListenAddress(std::string_view listen, bool ipv6Available);

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// Where a connect() from this host reaches a listener bound to `host` on `port`: the address
// itself, loopback for a wildcard (0.0.0.0, [::]), the first IPv4 address of a name. nullopt
// when the host does not resolve.
std::optional<SocketAddress> localAddressOf(const std::string& host, int port);

// Opens one TCP connection to `address` and closes it without sending anything. Returns whether
// the connection was made.
bool connectAndClose(const SocketAddress& address);

}  // namespace hc::metrics
