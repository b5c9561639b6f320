#include "daemon/config/settings.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <sstream>
#include <utility>

namespace hc::config::detail {
namespace {

using C = DaemonConfig;

// Every tunable, declared once: its TOML key, environment name and flags derive from this row.
const std::array<Setting, 54> kSettings = {{
    {"server", "socket", &C::socketPath, "--socket", "Unix socket the local clients connect to"},
    {"server", "log_level", &C::logLevel, "--log-level", "trace, debug, info, warn, error or off"},
    {"server", "state_dir", &C::stateDir, "--state-dir",
     "where flight records are dumped (default $STATE_DIRECTORY or /var/lib/hetero-comm)"},
    {"session", "segment_bytes", &C::segmentBytes, "--segment-bytes",
     "default shared segment per client (bytes, or \"512MiB\")"},
    {"session", "max_segment_bytes", &C::maxSegmentBytes, "--max-segment-bytes",
     "largest segment a client may request"},
    {"session", "ring_entries", &C::ringEntries, "--ring-entries",
     "submission ring slots per client: a power of two in [16, 4096]"},
    {"session", "max_clients", &C::maxClients, "", "clients connected at once"},
    {"session", "max_clients_per_uid", &C::maxClientsPerUid, "",
     "connections one uid may hold at once"},
    {"session", "max_segment_bytes_per_uid", &C::maxSegmentBytesPerUid, "",
     "the segments of one uid's clients together (bytes, or \"64GiB\")"},
    {"session", "hello_timeout_ms", &C::helloTimeoutMs, "",
     "a connection that has not sent its Hello by then is closed"},
    {"session", "max_ranks", &C::maxRanks, "",
     "most ranks a local client may declare for a communicator"},
    {"session", "max_staging_bytes", &C::maxStagingBytes, "",
     "host memory held at once to stage operands outside the segment (bytes, or \"8GiB\")"},
    {"session", "cross_memory_attach", &C::crossMemoryAttach, "--cross-memory-attach",
     "let clients that ask have their own memory read and written through their /proc/self/mem"},
    {"access", "allow_uids", &C::allowUids, "",
     "extra uids allowed to connect (the daemon's uid and root always are)"},
    {"access", "allow_groups", &C::allowGroups, "", "groups whose members may connect"},
    {"access", "socket_group", &C::socketGroup, "",
     "group owner given to the socket when the group exists (\"\" keeps it)"},
    {"exec", "reduction_threads", &C::reductionThreads, "--reduction-threads",
     "reduction pool size; 0 = CPUs this process may use, capped at 16"},
    {"exec", "inline_bytes", &C::inlineBytes, "--inline-bytes",
     "ops moving up to this many bytes run on the IPC thread"},
    {"exec", "spin_us", &C::spinUs, "--spin-us",
     "microseconds a loop polls after activity before it sleeps (0..10000)"},
    {"comm", "init_timeout_ms", &C::initTimeoutMs, "--init-timeout-ms",
     "deadline for all ranks of a communicator to join (> 0)"},
    {"comm", "op_timeout_ms", &C::opTimeoutMs, "--op-timeout-ms",
     "0 = a late rank is waited for without limit"},
    {"comm", "late_report_ms", &C::lateReportMs, "",
     "after this long waiting for a rank, log who has not posted and dump the flight record; "
     "0 = never"},
    {"comm", "flight_record_entries", &C::flightRecordEntries, "",
     "operations the flight recorder keeps per communicator (1..1000000)"},
    {"comm", "init_across_uids", &C::initAcrossUids, "",
     "ranks of one communicator here may be processes of different uids"},
    {"peer", "listen", &C::peerListen, "",
     "host:port of the Peer gRPC listener (port 0: any free port); \"\" = none, single-node only"},
    {"peer", "advertise", &C::peerAdvertise, "",
     "host:port other daemons reach the listener at; \"\" = listen host and bound port"},
    {"peer", "token_file", &C::peerTokenFile, "", "the cluster token, a file of mode 0600"},
    {"peer", "socket_ifname", &C::peerSocketIfname, "",
     "interfaces for UCX tcp, NCCL_SOCKET_IFNAME syntax; \"\" = all (also HC_SOCKET_IFNAME)"},
    {"peer", "ucx_transports", &C::peerUcxTransports, "",
     "UCX_TLS for the daemons' UCX, e.g. \"tcp,self\"; \"\" = UCX's own choice"},
    {"peer", "keepalive_ms", &C::peerKeepaliveMs, "",
     "how often UCX checks each peer daemon's endpoint (>= 10)"},
    {"peer", "silence_timeout_ms", &C::peerSilenceTimeoutMs, "",
     "a peer daemon silent this long while an operation needs it has failed; 0 = off"},
    {"peer", "algo", &C::peerAlgo, "",
     "allreduce among daemons: auto, ring or rd (recursive_doubling) (also HC_ALGO)"},
    {"peer", "chunk_bytes", &C::peerChunkBytes, "",
     "pipeline chunk of inter-node transfers (>= 4KiB)"},
    {"control", "admin_socket", &C::controlAdminSocket, "--admin-socket",
     "Unix socket of the Health and Control gRPC services; \"\" = none (default: beside the "
     "client socket, <name>-admin.sock)"},
    {"control", "listen", &C::controlListen, "",
     "loopback host:port for Health and Control over TCP (port 0: any free port); \"\" = none"},
    {"control", "health_listen", &C::controlHealthListen, "",
     "host:port of a plaintext Health-only listener for probes (port 0: any free port); \"\" = "
     "none"},
    {"control", "tls_cert_file", &C::controlTlsCertFile, "",
     "PEM certificate of the TCP control listener; \"\" = plaintext (loopback only)"},
    {"control", "tls_key_file", &C::controlTlsKeyFile, "", "PEM private key of tls_cert_file"},
    {"control", "tls_client_ca_file", &C::controlTlsClientCaFile, "",
     "PEM CA that client certificates must chain to; with it control.listen may leave loopback"},
    {"metrics", "listen", &C::metricsListen, "",
     "host:port of the Prometheus /metrics endpoint (port 0: any free port); \"\" = none"},
    {"devices", "staging_chunk_bytes", &C::stagingChunkBytes, "",
     "device<->host staging copies are issued in chunks of this size (>= 4KiB)"},
    {"devices", "direct", &C::devicesDirect, "",
     "lend device memory to the transport in place where it moves that memory type and a probe "
     "at startup shows it zero copy; false = always stage through host memory"},
    {"devices", "legacy_ipc", &C::devicesLegacyIpc, "",
     "accept device memory named by a legacy IPC handle, which any process that learns it can "
     "name; false = only VMM memory passed as an fd"},
    {"devices", "max_imported_bytes_per_client", &C::devicesMaxImportedBytesPerClient, "",
     "device memory one client may have mapped into the daemon at once; past it the client "
     "releases its least recently used registrations; 0 = no cap"},
    {"devices", "measure", &C::devicesMeasure, "",
     "time each GPU's copies and reduction kernel at startup (a background thread, tens of ms "
     "per GPU) for the device weights; false = only when hcctl devices --measure asks"},
    {"devices.sim", "nvidia", &C::simNvidia, "",
     "simulated GPUs labelled nvidia (0..16); for machines without GPUs"},
    {"devices.sim", "amd", &C::simAmd, "", "simulated GPUs labelled amd (0..16)"},
    {"devices.sim", "copy_gbps", &C::simCopyGbps, "",
     "simulated copy bandwidth of each sim stream in GB/s; 0 = unlimited"},
    {"devices.sim", "latency_us", &C::simLatencyUs, "",
     "microseconds added to every sim copy and reduction (<= 10000000)"},
    {"devices.sim", "fail_copy_at", &C::simFailCopyAt, "",
     "fault injection: the N-th copy on each sim device fails; 0 = off"},
    {"devices.sim", "slow_stream_us", &C::simSlowStreamUs, "",
     "fault injection: extra microseconds per task on every sim stream (<= 10000000)"},
    {"devices.sim", "memory_bytes", &C::simMemoryBytes, "",
     "memory each sim device reports (nominal: nothing is reserved)"},
    {"devices.sim", "device_mbps", &C::simDeviceMbps, "",
     "one speed per sim device (nvidia first, then amd) in MB/s for its copies and kernels, "
     "replacing copy_gbps: GPUs of different speeds; empty = all alike"},
    {"devices.sim", "nic_direct", &C::simNicDirect, "",
     "the transport may reach sim memory in place, as a NIC with GPUDirect RDMA reaches a GPU's"},
}};

const std::array<std::string_view, 10> kSections = {
    "server", "session", "access", "exec",    "comm",
    "peer",   "control", "metrics", "devices", "devices.sim"};

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// Upper-case, with the dots of a nested section as underscores: HC_DEVICES_SIM_NVIDIA.
std::string envWord(std::string_view text) {
  std::string word(text);
  for (char& c : word) {
    c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return word;
}

// Shortest text that reads back as the same double, always with a '.' or an exponent so that
// TOML takes it as a float ("0.0", "12.5", "1e+20").
void writeDouble(double v, std::ostream& out) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string text(buf, ec == std::errc() ? end : buf);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // 'n': inf, nan
  out << text;
}

std::string bad(const Setting& s, std::string_view expected, std::string_view got) {
  return dottedName(s) + ": expected " + std::string(expected) + ", got " + std::string(got);
}

template <typename T>
hc::Result<T> parseInteger(const Setting& s, std::string_view text, std::string_view expected) {
  std::string_view t = trim(text);
  T value{};
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
    return hc::invalidArgument(bad(s, expected, "'" + std::string(text) + "'"));
  }
  return value;
}

template <typename T>
hc::Result<T> nodeInteger(const Setting& s, const toml::node& node, std::string_view expected) {
  const auto* v = node.as_integer();
  if (v == nullptr) {
    std::ostringstream type;
    type << node.type();
    return hc::invalidArgument(bad(s, expected, "a " + type.str()));
  }
  int64_t i = v->get();
  if (!std::in_range<T>(i)) {
    return hc::invalidArgument(bad(s, expected, std::to_string(i)));
  }
  return static_cast<T>(i);
}

hc::Result<uint64_t> sizeFrom(const Setting& s, std::string_view text) {
  auto r = parseSize(text);
  if (!r) return hc::invalidArgument(dottedName(s) + ": " + r.status().message());
  return r;
}

std::vector<std::string_view> splitList(std::string_view text) {
  std::vector<std::string_view> items;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    if (!item.empty()) items.push_back(item);
    if (comma == std::string_view::npos) return items;
    text.remove_prefix(comma + 1);
  }
}

void writeString(std::string_view s, std::ostream& out) {
  out << '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out << buf;
    } else {
      out << c;
    }
  }
  out << '"';
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::span<const Setting> settings() { return kSettings; }
std::span<const std::string_view> sections() { return kSections; }

bool isSection(std::string_view section) {
  return std::find(kSections.begin(), kSections.end(), section) != kSections.end();
}

bool isSectionParent(std::string_view name) {
  return std::any_of(kSections.begin(), kSections.end(), [name](std::string_view section) {
    return section.size() > name.size() && section.starts_with(name) && section[name.size()] == '.';
  });
}

const Setting* findSetting(std::string_view section, std::string_view key) {
  for (const Setting& s : kSettings) {
    if (s.section == section && s.key == key) return &s;
  }
  return nullptr;
}

const Setting* findSetting(std::string_view dotted) {
  // The key is after the last dot: sections may hold dots themselves ("devices.sim.nvidia").
  size_t dot = dotted.rfind('.');
  if (dot == std::string_view::npos) return nullptr;
  return findSetting(dotted.substr(0, dot), dotted.substr(dot + 1));
}

std::string dottedName(const Setting& s) {
  return std::string(s.section) + "." + std::string(s.key);
}

std::string envName(const Setting& s) { return envPrefix(s.section) + envWord(s.key); }

std::string envPrefix(std::string_view section) { return "HC_" + envWord(section) + "_"; }

std::span<const EnvAlias> envAliases() {
  static constexpr EnvAlias kAliases[] = {{"HC_SOCKET", "server.socket"},
                                          {"HC_LOG_LEVEL", "server.log_level"},
                                          {"HC_SOCKET_IFNAME", "peer.socket_ifname"},
                                          {"HC_ALGO", "peer.algo"}};
  return kAliases;
}

std::string humanSize(uint64_t v) {
  constexpr std::pair<unsigned, const char*> kUnits[] = {
      {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  for (auto [shift, name] : kUnits) {
    if (v != 0 && v % (uint64_t{1} << shift) == 0) {
      return std::to_string(v >> shift) + " " + name;
    }
  }
  return {};
}

hc::Status applyText(const Setting& s, std::string_view text, DaemonConfig* config) {
  const Overloaded visitor{
      [&](std::string C::*f) -> hc::Status {
        config->*f = std::string(text);
        return {};
      },
      [&](uint64_t C::*f) -> hc::Status {
        auto v = sizeFrom(s, text);
        if (v) config->*f = *v;
        return v.status();
      },
      [&](uint32_t C::*f) -> hc::Status {
        auto v = parseInteger<uint32_t>(s, text, "an unsigned 32-bit integer");
        if (v) config->*f = *v;
        return v.status();
      },
      [&](int32_t C::*f) -> hc::Status {
        auto v = parseInteger<int32_t>(s, text, "a 32-bit integer");
        if (v) config->*f = *v;
        return v.status();
      },
      [&](double C::*f) -> hc::Status {
        std::string_view t = trim(text);
        double value = 0;
        auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
        if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
          return hc::invalidArgument(bad(s, "a number", "'" + std::string(text) + "'"));
        }
        config->*f = value;
        return {};
      },
      [&](bool C::*f) -> hc::Status {
        std::string_view t = trim(text);
        if (t == "true" || t == "1" || t == "yes" || t == "on") {
          config->*f = true;
        } else if (t == "false" || t == "0" || t == "no" || t == "off") {
          config->*f = false;
        } else {
          return hc::invalidArgument(bad(s, "true or false", "'" + std::string(text) + "'"));
        }
        return {};
      },
      [&](std::vector<uint32_t> C::*f) -> hc::Status {
        std::vector<uint32_t> out;
        for (std::string_view item : splitList(text)) {
          auto v = parseInteger<uint32_t>(s, item, "a comma-separated list of uids");
          if (!v) return v.status();
          out.push_back(*v);
        }
        config->*f = std::move(out);
        return {};
      },
      [&](std::vector<std::string> C::*f) -> hc::Status {
        std::vector<std::string> out;
        for (std::string_view item : splitList(text)) out.emplace_back(item);
        config->*f = std::move(out);
        return {};
      },
  };
  return std::visit(visitor, s.field);
}

hc::Status applyNode(const Setting& s, const toml::node& node, DaemonConfig* config) {
  std::ostringstream type;
  type << node.type();
  const std::string got = "a " + type.str();
  const Overloaded visitor{
      [&](std::string C::*f) -> hc::Status {
        if (!node.is_string()) {
          return hc::invalidArgument(bad(s, "a string", got));
        }
        config->*f = node.as_string()->get();
        return {};
      },
      [&](uint64_t C::*f) -> hc::Status {
        if (node.is_string()) return applyText(s, node.as_string()->get(), config);
        auto v = nodeInteger<uint64_t>(s, node, "a byte count (integer or \"512MiB\")");
        if (v) config->*f = *v;
        return v.status();
      },
      [&](uint32_t C::*f) -> hc::Status {
        auto v = nodeInteger<uint32_t>(s, node, "an unsigned 32-bit integer");
        if (v) config->*f = *v;
        return v.status();
      },
      [&](int32_t C::*f) -> hc::Status {
        auto v = nodeInteger<int32_t>(s, node, "a 32-bit integer");
        if (v) config->*f = *v;
        return v.status();
      },
      [&](double C::*f) -> hc::Status {
        // An integer is a fine number too: copy_gbps = 12.
        if (const auto* i = node.as_integer()) {
          config->*f = static_cast<double>(i->get());
        } else if (const auto* d = node.as_floating_point()) {
          config->*f = d->get();
        } else {
          return hc::invalidArgument(bad(s, "a number", got));
        }
        return {};
      },
      [&](bool C::*f) -> hc::Status {
        const auto* v = node.as_boolean();
        if (v == nullptr) return hc::invalidArgument(bad(s, "true or false", "another type"));
        config->*f = v->get();
        return {};
      },
      [&](std::vector<uint32_t> C::*f) -> hc::Status {
        const auto* arr = node.as_array();
        if (arr == nullptr) return hc::invalidArgument(bad(s, "an array of uids", got));
        std::vector<uint32_t> out;
        for (const toml::node& item : *arr) {
          auto v = nodeInteger<uint32_t>(s, item, "an array of uids");
          if (!v) return v.status();
          out.push_back(*v);
        }
        config->*f = std::move(out);
        return {};
      },
      [&](std::vector<std::string> C::*f) -> hc::Status {
        const auto* arr = node.as_array();
        // An empty array is homogeneous in no type, yet is a fine empty list.
        if (arr == nullptr || (!arr->empty() && !arr->is_homogeneous(toml::node_type::string))) {
          return hc::invalidArgument(bad(s, "an array of strings", got));
        }
        std::vector<std::string> out;
        for (const toml::node& item : *arr) out.push_back(item.as_string()->get());
        config->*f = std::move(out);
        return {};
      },
  };
  return std::visit(visitor, s.field);
}

void writeValue(const Setting& s, const DaemonConfig& config, std::ostream& out) {
  const Overloaded visitor{
      [&](std::string C::*f) { writeString(config.*f, out); },
      [&](uint64_t C::*f) {
        // TOML integers are signed 64-bit; a larger size survives as a string.
        uint64_t v = config.*f;
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          out << '"' << v << '"';
        } else {
          out << v;
        }
      },
      [&](uint32_t C::*f) { out << config.*f; },
      [&](int32_t C::*f) { out << config.*f; },
      [&](bool C::*f) { out << (config.*f ? "true" : "false"); },
      [&](double C::*f) { writeDouble(config.*f, out); },
      [&](std::vector<uint32_t> C::*f) {
        out << '[';
        for (size_t i = 0; i < (config.*f).size(); ++i) {
          out << (i ? ", " : "") << (config.*f)[i];
        }
        out << ']';
      },
      [&](std::vector<std::string> C::*f) {
        out << '[';
        for (size_t i = 0; i < (config.*f).size(); ++i) {
          out << (i ? ", " : "");
          writeString((config.*f)[i], out);
        }
        out << ']';
      },
  };
  std::visit(visitor, s.field);
}

}  // namespace hc::config::detail
