#include "daemon/config/daemon_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "daemon/config/logging.h"
#include "daemon/config/settings.h"

extern char** environ;  // NOLINT: POSIX names it; unistd.h declares it only under _GNU_SOURCE

namespace hc::config {
namespace detail {
namespace {

constexpr uint32_t kMinRingEntries = 16;
constexpr uint32_t kMaxRingEntries = 4096;
constexpr uint64_t kMinSegmentBytes = 4096;  // one page: the segment is mapped whole
constexpr uint32_t kMaxClients = 65536;
constexpr uint32_t kMaxReductionThreads = 256;
constexpr uint32_t kMaxSpinUs = 10000;
constexpr uint32_t kAutoReductionThreadsCap = 16;
constexpr uint32_t kMinPeerKeepaliveMs = 10;
constexpr uint64_t kMinPeerChunkBytes = 4096;
// A unique id carries at most this many bytes of the root's address (kMaxRootAddressBytes in
// daemon/peer/unique_id.h; config links no other layer, so the number is repeated here).
constexpr size_t kMaxAdvertiseBytes = 103;
// The words coll/net's parseAllreduceAlgo takes (any case); config does not link coll/net.
constexpr std::string_view kPeerAlgos[] = {"auto", "ring", "rd", "recursive_doubling"};
// kMaxSimDevicesPerVendor in daemon/device/sim/sim_node.h; config does not link device/.
constexpr int32_t kMaxSimDevicesPerVendor = 16;
// Simulated delays above 10 s are typing mistakes, not slow GPUs, and would stall teardown.
constexpr uint32_t kMaxSimDelayUs = 10'000'000;
constexpr uint64_t kMinSimMemoryBytes = 1ull << 20;

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

struct HostPort {
  std::string_view host;  // IPv6 with its brackets
  uint32_t port = 0;
};

// "host:port" or "[v6]:port", the host in the characters validatePeerAddress
// (daemon/peer/unique_id.h) accepts, the port 0..65535. The error says what is wrong.
hc::Result<HostPort> splitHostPort(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return hc::invalidArgument("expected host:port");
  HostPort out;
  out.host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  auto isHostChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  };
  auto isV6Char = [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
  };
  const std::string_view host = out.host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string_view v6 = host.substr(1, host.size() - 2);
    if (v6.empty() || !std::all_of(v6.begin(), v6.end(), isV6Char)) {
      return hc::invalidArgument("bad IPv6 host");
    }
  } else if (host.empty() || !std::all_of(host.begin(), host.end(), isHostChar)) {
    return hc::invalidArgument("bad host (IPv6 needs brackets)");
  }
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || out.port > 65535) {
    return hc::invalidArgument("port must be a number in 0..65535");
  }
  return out;
}

// 0.0.0.0, [::] and other spellings of the IPv6 any-address: fine to listen on, useless to dial.
bool isWildcardHost(std::string_view host) {
  if (host == "0.0.0.0") return true;
  if (host.size() < 3 || host.front() != '[') return false;
  const std::string_view v6 = host.substr(1, host.size() - 2);
  return std::all_of(v6.begin(), v6.end(), [](char c) { return c == ':' || c == '0'; });
}

// [peer]; `fail(key, message)` adds where the key was set.
template <typename Fail>
hc::Status validatePeer(const DaemonConfig& c, const Fail& fail) {
  if (!c.peerListen.empty()) {
    auto listen = splitHostPort(c.peerListen);
    if (!listen) {
      return fail("peer.listen", "peer.listen '" + c.peerListen +
                                     "': " + listen.status().message() + " (\"\" = no listener)");
    }
    if (c.peerAdvertise.empty() && isWildcardHost(listen->host)) {
      return fail("peer.listen", "peer.listen '" + c.peerListen +
                                     "' listens on every address, which other daemons cannot "
                                     "dial: set peer.advertise to the host:port they reach");
    }
    // The derived address ("host:65535" at most) must fit a unique id.
    if (c.peerAdvertise.empty() && listen->host.size() + 6 > kMaxAdvertiseBytes) {
      return fail("peer.listen",
                  "peer.listen host is too long to advertise in a unique id (at most " +
                      std::to_string(kMaxAdvertiseBytes - 6) + " bytes): set peer.advertise");
    }
    if (c.peerTokenFile.empty()) {
      return fail("peer.token_file",
                  "peer.token_file must name the cluster token file when peer.listen is set");
    }
  }
  if (!c.peerAdvertise.empty()) {
    auto advertise = splitHostPort(c.peerAdvertise);
    std::string why;
    if (!advertise) {
      why = advertise.status().message();
    } else if (advertise->port == 0) {
      why = "port 0 cannot be dialled";
    } else if (isWildcardHost(advertise->host)) {
      why = "a wildcard address cannot be dialled";
    } else if (c.peerAdvertise.size() > kMaxAdvertiseBytes) {
      why = "longer than the " + std::to_string(kMaxAdvertiseBytes) + " bytes a unique id holds";
    }
    if (!why.empty()) {
      return fail("peer.advertise", "peer.advertise '" + c.peerAdvertise + "': " + why);
    }
  }
  if (c.peerKeepaliveMs < kMinPeerKeepaliveMs) {
    return fail("peer.keepalive_ms", "peer.keepalive_ms must be at least " +
                                         std::to_string(kMinPeerKeepaliveMs) + ", got " +
                                         std::to_string(c.peerKeepaliveMs));
  }
  if (std::none_of(std::begin(kPeerAlgos), std::end(kPeerAlgos),
                   [&](std::string_view word) { return iequals(c.peerAlgo, word); })) {
    return fail("peer.algo", "peer.algo must be one of auto, ring, rd, recursive_doubling; got '" +
                                 c.peerAlgo + "'");
  }
  if (c.peerChunkBytes < kMinPeerChunkBytes) {
    return fail("peer.chunk_bytes", "peer.chunk_bytes must be at least " +
                                        std::to_string(kMinPeerChunkBytes) + " (4 KiB), got " +
                                        std::to_string(c.peerChunkBytes));
  }
  return {};
}

// An address literal in 127.0.0.0/8 or ::1, or the name localhost. Matched as an address, not by
// its text: "127.example.com" is a name that can resolve anywhere.
bool isLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  std::string literal(host);
  if (literal.size() >= 2 && literal.front() == '[' && literal.back() == ']') {
    literal = literal.substr(1, literal.size() - 2);
    in6_addr v6{};
    return ::inet_pton(AF_INET6, literal.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
  }
  in_addr v4{};
  return ::inet_pton(AF_INET, literal.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

// [control]; `fail(key, message)` adds where the key was set.
template <typename Fail>
hc::Status validateControl(const DaemonConfig& c, const Fail& fail) {
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (c.controlAdminSocket.size() > kMaxSocketPath) {
    return fail("control.admin_socket",
                "control.admin_socket is " + std::to_string(c.controlAdminSocket.size()) +
                    " bytes long; a Unix socket path holds at most " +
                    std::to_string(kMaxSocketPath));
  }
  if (!c.controlAdminSocket.empty() && c.controlAdminSocket == c.socketPath) {
    return fail("control.admin_socket", "control.admin_socket must differ from server.socket");
  }
  if (!c.controlListen.empty()) {
    auto listen = splitHostPort(c.controlListen);
    if (!listen) {
      return fail("control.listen",
                  "control.listen '" + c.controlListen + "': " + listen.status().message());
    }
    // Control tells a lot about the node: off the node it needs mutual TLS.
    const bool mutualTls = !c.controlTlsCertFile.empty() && !c.controlTlsClientCaFile.empty();
    if (!isLoopbackHost(listen->host) && !mutualTls) {
      return fail("control.listen",
                  "control.listen '" + c.controlListen +
                      "' is not a loopback address; a remote control port needs mutual TLS "
                      "(control.tls_cert_file, tls_key_file and tls_client_ca_file), or use "
                      "127.0.0.1, [::1] or the admin socket; for probes, "
                      "control.health_listen serves Health alone");
    }
  }
  if (c.controlTlsCertFile.empty() != c.controlTlsKeyFile.empty()) {
    return fail(c.controlTlsCertFile.empty() ? "control.tls_key_file" : "control.tls_cert_file",
                "control.tls_cert_file and control.tls_key_file go together: set both or neither");
  }
  if (!c.controlTlsClientCaFile.empty() && c.controlTlsCertFile.empty()) {
    return fail("control.tls_client_ca_file",
                "control.tls_client_ca_file needs control.tls_cert_file and tls_key_file");
  }
  if (!c.controlTlsCertFile.empty() && c.controlListen.empty()) {
    return fail("control.tls_cert_file",
                "control.tls_cert_file is set but control.listen is not: TLS applies to the TCP "
                "control listener only");
  }
  if (!c.metricsListen.empty()) {
    auto metrics = splitHostPort(c.metricsListen);
    if (!metrics) {
      return fail("metrics.listen",
                  "metrics.listen '" + c.metricsListen + "': " + metrics.status().message());
    }
  }
  if (!c.controlHealthListen.empty()) {
    auto health = splitHostPort(c.controlHealthListen);
    if (!health) {
      return fail("control.health_listen", "control.health_listen '" + c.controlHealthListen +
                                               "': " + health.status().message());
    }
  }
  return {};
}

// [devices.sim]; `fail(key, message)` adds where the key was set.
template <typename Fail>
hc::Status validateSim(const DaemonConfig& c, const Fail& fail) {
  const std::pair<const char*, int32_t> counts[] = {{"devices.sim.nvidia", c.simNvidia},
                                                    {"devices.sim.amd", c.simAmd}};
  for (auto [key, count] : counts) {
    if (count < 0 || count > kMaxSimDevicesPerVendor) {
      return fail(key,
                  std::string(key) + " must be in [0, " + std::to_string(kMaxSimDevicesPerVendor) +
                      "] (sim devices of that vendor on this node), got " + std::to_string(count));
    }
  }
  if (!std::isfinite(c.simCopyGbps) || c.simCopyGbps < 0) {
    std::ostringstream got;
    got << c.simCopyGbps;
    return fail("devices.sim.copy_gbps",
                "devices.sim.copy_gbps must be a finite number >= 0 (GB/s; 0 = unlimited), got " +
                    got.str());
  }
  const size_t simDevices = static_cast<size_t>(c.simNvidia) + static_cast<size_t>(c.simAmd);
  if (!c.simDeviceMbps.empty() && c.simDeviceMbps.size() != simDevices) {
    return fail("devices.sim.device_mbps",
                "devices.sim.device_mbps lists " + std::to_string(c.simDeviceMbps.size()) +
                    " speeds for " + std::to_string(simDevices) +
                    " sim devices (one per device: nvidia first, then amd)");
  }
  for (uint32_t mbps : c.simDeviceMbps) {
    if (mbps == 0) return fail("devices.sim.device_mbps", "devices.sim.device_mbps: a speed is 0");
  }
  const std::pair<const char*, uint32_t> delays[] = {
      {"devices.sim.latency_us", c.simLatencyUs},
      {"devices.sim.slow_stream_us", c.simSlowStreamUs}};
  for (auto [key, us] : delays) {
    if (us > kMaxSimDelayUs) {
      return fail(key, std::string(key) + " must be at most " + std::to_string(kMaxSimDelayUs) +
                           " (10 s), got " + std::to_string(us));
    }
  }
  if (c.stagingChunkBytes < 4096) {
    return fail("devices.staging_chunk_bytes",
                "devices.staging_chunk_bytes must be at least 4096, got " +
                    std::to_string(c.stagingChunkBytes));
  }
  if (c.simMemoryBytes < kMinSimMemoryBytes) {
    return fail("devices.sim.memory_bytes",
                "devices.sim.memory_bytes must be at least " + std::to_string(kMinSimMemoryBytes) +
                    " (1 MiB), got " + std::to_string(c.simMemoryBytes));
  }
  // A fault that can never fire would let a fault test pass without testing anything.
  if (c.simFailCopyAt != 0 && c.simNvidia == 0 && c.simAmd == 0) {
    return fail("devices.sim.fail_copy_at",
                "devices.sim.fail_copy_at is set but there are no sim devices (set "
                "devices.sim.nvidia or devices.sim.amd)");
  }
  return {};
}

}  // namespace

hc::Status validateWithOrigins(const DaemonConfig& c, const Origins* origins) {
  auto fail = [&](std::string_view key, std::string message) {
    if (origins != nullptr) {
      if (auto it = origins->find(std::string(key)); it != origins->end()) {
        message += " (set by " + it->second + ")";
      }
    }
    return hc::invalidArgument(std::move(message));
  };
  if (!parseLogLevel(c.logLevel).isOk()) {
    return fail("server.log_level",
                "server.log_level must be one of trace, debug, info, warn, error, off; got '" +
                    c.logLevel + "'");
  }
  if (c.socketPath.empty()) return fail("server.socket", "server.socket must not be empty");
  // sun_path holds the path and its terminating NUL.
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (c.socketPath.size() > kMaxSocketPath) {
    return fail("server.socket", "server.socket is " + std::to_string(c.socketPath.size()) +
                                     " bytes long; a Unix socket path holds at most " +
                                     std::to_string(kMaxSocketPath));
  }
  if (c.segmentBytes < kMinSegmentBytes) {
    return fail("session.segment_bytes", "session.segment_bytes must be at least " +
                                             std::to_string(kMinSegmentBytes) + ", got " +
                                             std::to_string(c.segmentBytes));
  }
  if (c.segmentBytes > c.maxSegmentBytes) {
    return fail("session.segment_bytes", "session.segment_bytes (" +
                                             std::to_string(c.segmentBytes) +
                                             ") must not exceed session.max_segment_bytes (" +
                                             std::to_string(c.maxSegmentBytes) + ")");
  }
  const uint32_t ring = c.ringEntries;
  if (ring < kMinRingEntries || ring > kMaxRingEntries || (ring & (ring - 1)) != 0) {
    return fail(
        "session.ring_entries",
        "session.ring_entries must be a power of two in [16, 4096], got " + std::to_string(ring));
  }
  if (c.maxClients < 1 || c.maxClients > kMaxClients) {
    return fail("session.max_clients",
                "session.max_clients must be in [1, 65536], got " + std::to_string(c.maxClients));
  }
  if (c.maxClientsPerUid < 1) {
    return fail("session.max_clients_per_uid", "session.max_clients_per_uid must be at least 1");
  }
  if (c.maxSegmentBytesPerUid < c.segmentBytes) {
    return fail("session.max_segment_bytes_per_uid",
                "session.max_segment_bytes_per_uid (" + std::to_string(c.maxSegmentBytesPerUid) +
                    ") must not be below session.segment_bytes (" +
                    std::to_string(c.segmentBytes) + "): no client could connect");
  }
  if (c.helloTimeoutMs < 100 || c.helloTimeoutMs > 600000) {
    return fail("session.hello_timeout_ms", "session.hello_timeout_ms must be in [100, 600000], got " +
                                                std::to_string(c.helloTimeoutMs));
  }
  if (c.maxRanks < 1 || c.maxRanks > DaemonConfig::kMaxRanksLimit) {
    return fail("session.max_ranks", "session.max_ranks must be in [1, " +
                                         std::to_string(DaemonConfig::kMaxRanksLimit) + "], got " +
                                         std::to_string(c.maxRanks));
  }
  if (c.maxStagingBytes < (1u << 20) || c.maxStagingBytes > (1ull << 48)) {
    return fail("session.max_staging_bytes",
                "session.max_staging_bytes must be in [1MiB, 256TiB], got " +
                    std::to_string(c.maxStagingBytes));
  }
  for (const std::string& group : c.allowGroups) {
    if (group.empty()) {
      return fail("access.allow_groups", "access.allow_groups holds an empty group name");
    }
  }
  if (c.reductionThreads > kMaxReductionThreads) {
    return fail("exec.reduction_threads",
                "exec.reduction_threads must be in [0, 256] (0 = one per CPU), got " +
                    std::to_string(c.reductionThreads));
  }
  if (c.spinUs > kMaxSpinUs) {
    return fail("exec.spin_us",
                "exec.spin_us must be in [0, 10000], got " + std::to_string(c.spinUs));
  }
  if (c.initTimeoutMs <= 0) {
    return fail("comm.init_timeout_ms", "comm.init_timeout_ms must be greater than 0, got " +
                                            std::to_string(c.initTimeoutMs));
  }
  if (c.lateReportMs < 0) {
    return fail("comm.late_report_ms", "comm.late_report_ms must be >= 0 (0 = never), got " +
                                           std::to_string(c.lateReportMs));
  }
  if (c.flightRecordEntries < 1 || c.flightRecordEntries > 1000000) {
    return fail("comm.flight_record_entries",
                "comm.flight_record_entries must be in [1, 1000000], got " +
                    std::to_string(c.flightRecordEntries));
  }
  if (c.stateDir.empty()) {
    // defaultStateDir() found no home of this user, and it never falls back to a shared folder.
    return fail("server.state_dir",
                "server.state_dir is empty, and no default applies here (no STATE_DIRECTORY, "
                "XDG_STATE_HOME, HOME or home folder in the user database): set --state-dir");
  }
  if (c.stateDir[0] != '/') {
    return fail("server.state_dir",
                "server.state_dir must be an absolute path, got '" + c.stateDir + "'");
  }
  if (c.opTimeoutMs < 0) {
    return fail("comm.op_timeout_ms", "comm.op_timeout_ms must be 0 (no limit) or positive, got " +
                                          std::to_string(c.opTimeoutMs));
  }
  HC_RETURN_IF_ERROR(validatePeer(c, fail));
  HC_RETURN_IF_ERROR(validateControl(c, fail));
  return validateSim(c, fail);
}

}  // namespace detail

hc::Result<uint64_t> parseSize(std::string_view text) {
  std::string_view t = detail::trim(text);
  uint64_t number = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), number);
  if (ec == std::errc::result_out_of_range) {
    return hc::invalidArgument("byte count '" + std::string(text) + "' does not fit in 64 bits");
  }
  if (ec != std::errc()) {
    return hc::invalidArgument("expected a byte count like 4096 or \"512MiB\", got '" +
                               std::string(text) + "'");
  }
  std::string_view suffix = detail::trim(t.substr(end - t.data()));
  struct Unit {
    std::string_view a, b;
    unsigned shift;
  };
  constexpr Unit kUnits[] = {
      {"", "B", 0}, {"K", "KiB", 10}, {"M", "MiB", 20}, {"G", "GiB", 30}, {"T", "TiB", 40}};
  for (const Unit& u : kUnits) {
    if (!detail::iequals(suffix, u.a) && !detail::iequals(suffix, u.b)) continue;
    if (number > (std::numeric_limits<uint64_t>::max() >> u.shift)) {
      return hc::invalidArgument("byte count '" + std::string(text) + "' does not fit in 64 bits");
    }
    return number << u.shift;
  }
  return hc::invalidArgument("unknown size suffix in '" + std::string(text) +
                             "' (K, M, G, T, KiB, MiB, GiB, TiB: all powers of 1024)");
}

hc::Status validate(const DaemonConfig& config) {
  return detail::validateWithOrigins(config, nullptr);
}

std::string toToml(const DaemonConfig& config) {
  std::ostringstream out;
  out << "# hetero-commd configuration. Precedence: flags > HC_* environment > files > defaults.\n"
         "# Each key can also be set by HC_<SECTION>_<KEY> or --set <section>.<key>=<value>.\n";
  std::string_view section;
  for (const detail::Setting& s : detail::settings()) {
    if (s.section != section) {
      section = s.section;
      out << "\n[" << section << "]\n";
    }
    out << "# " << s.help << "\n" << s.key << " = ";
    detail::writeValue(s, config, out);
    if (const auto* size = std::get_if<uint64_t DaemonConfig::*>(&s.field)) {
      if (std::string human = detail::humanSize(config.**size); !human.empty()) {
        out << "  # " << human;
      }
    }
    out << "\n";
  }
  return out.str();
}

std::map<std::string, std::string> processEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string peerAdvertiseAddress(const DaemonConfig& config, uint16_t boundPort) {
  if (!config.peerAdvertise.empty()) return config.peerAdvertise;
  if (config.peerListen.empty()) return {};
  const size_t colon = config.peerListen.rfind(':');
  return config.peerListen.substr(0, colon) + ":" + std::to_string(boundPort);
}

uint32_t resolvedReductionThreads(const DaemonConfig& config) {
  if (config.reductionThreads != 0) return config.reductionThreads;
  // The affinity mask, not the online count: systemd's CPUAffinity= and container cpusets leave
  // the daemon fewer CPUs than the machine has.
  long cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<uint32_t>(std::clamp<long>(cpus, 1, detail::kAutoReductionThreadsCap));
}

}  // namespace hc::config
