// The UCX backend of hc::transport::Transport: what the rest of the daemon sees of it. No UCX
// header appears here; the implementation (ucx_transport_impl.h) is private to this folder.
// Depends on transport.h and hc_common; the target hc_transport_ucx links libucp.
//
// One Transport is one UCP context (features TAG and WAKEUP) with one worker in single-threaded
// mode, driven by the one progress thread that owns it. Every method runs on that thread, except
// eventFd() and name(), which may be read from anywhere.
//
// Owner's loop: progress() until it returns 0, then sleep in epoll on eventFd() with a timeout of
// at most maxSleep(options): UCX runs its keepalive only inside progress(). eventFd() is itself an
// epoll fd (over the worker's ucp_worker_get_efd() fd, armed by progress(), and an eventfd of the
// transport's own), so it can join the owner's epoll set like any other fd.
//
// Failure detection (tests/unit/daemon/transport/ucx_killed_peer_test.cc measures the first case):
//   - a peer process that dies (crash, SIGKILL, exit without closing) is detected as soon as its
//     kernel resets the connection: the survivor's event fd turns readable and the next progress()
//     fails every request with the peer (Unavailable), then calls the handler. Measured over tcp
//     on one host: 2-22 ms after SIGKILL with the machine loaded; the test fails above 2 s.
//   - a peer host that vanishes without a reset (power loss, partition): UCX's keepalive probes
//     each endpoint every keepaliveInterval, but over tcp a probe into the void only fails when
//     the kernel gives up: TCP keepalive on an idle socket (UCX_TCP_KEEPIDLE 10 s, then KEEPCNT
//     probes KEEPINTVL 2 s apart: about 28 s with UCX's defaults and the kernel's 9 probes), or
//     the retransmission timeout (net.ipv4.tcp_retries2, minutes) while data is unacknowledged.
//     Those settings come from the environment: UCX 1.13 ignores transport settings passed through
//     ucp_config_modify. Not measured here (one host). RDMA transports fail endpoints on their own
//     timeouts.
//   - a peer that is alive but stopped (SIGSTOP, a debugger) is not a failure at this layer: its
//     kernel still acknowledges (checked: no report within 10 s at a 1 s keepalive interval).
//     Liveness of a merely late rank belongs to the layers above.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/transport/transport.h"

namespace hc::transport {

struct UcxOptions {
  // UCX_TLS: the UCX transports to use, e.g. "tcp,self"; empty leaves UCX's own choice (the
  // environment's UCX_TLS, or all). Tests pin "tcp,self" so that two transports in one process or
  // on one host talk like separate nodes.
  std::string transports;
  // The network interfaces for tcp, in NCCL_SOCKET_IFNAME syntax: a comma-separated list of name
  // prefixes ("eth,ib"), exact names after "=" ("=eth0"), or interfaces to leave out after "^"
  // ("^docker,lo", "^=docker0"). Resolved against this host's interfaces into UCX_NET_DEVICES,
  // with every RDMA port kept; empty means every device. InvalidArgument at creation when no
  // interface matches.
  std::string socketIfname;
  // UCX_KEEPALIVE_INTERVAL: how often UCX checks each endpoint. The owner must call progress() at
  // least twice per interval (maxSleep()).
  std::chrono::milliseconds keepaliveInterval{1000};
  // Messages up to this many bytes travel inside their header message (one copy on each side);
  // longer ones follow their header as a separate UCX message received straight into the posted
  // buffer. See ucx_wire.h. Every daemon must use the same value: a receiver drops unread any
  // control message longer than a header (kMaxHeaderBytes) plus its own inlineBytes.
  size_t inlineBytes = 8 * 1024;
  // Hellos from endpoints this one has not connected to yet are held until it does, at most this
  // many (the oldest are dropped beyond it). A peer daemon that connects first leaves one, so
  // this must exceed the number of daemons a job can span; each costs under 100 bytes.
  size_t maxPendingHellos = 4096;
};

// The longest the owner may sleep on eventFd() between progress() calls: half the keepalive
// interval (DESIGN.md, Threads), at least 1 ms.
std::chrono::milliseconds maxSleep(const UcxOptions& options);

// A new UCX endpoint. InvalidArgument for options UCX or this host cannot satisfy (an interface
// spec that matches nothing, an unknown transport); TransportError or NoResource when UCX fails
// to start. Control path: may take tens of milliseconds.
[[nodiscard]] Result<std::unique_ptr<Transport>> createUcxTransport(const UcxOptions& options);

// The UCX library's version ("1.13.1"), for build_info and logs.
std::string ucxVersion();

}  // namespace hc::transport
