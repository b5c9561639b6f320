// The daemon's configuration: one validated struct built from defaults, the TOML file(s), HC_*
// environment variables and command-line flags, in that order of increasing precedence.
// Control path only: these functions may allocate and read files; none of them throws.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/paths.h"
#include "common/status.h"

namespace hc::config {

// The file read when neither --config nor HC_CONFIG names one; conf.d/*.toml beside it follow.
inline constexpr std::string_view kDefaultConfigPath = "/etc/hetero-comm/hetero-commd.toml";

// Every field is also a TOML key "<section>.<key>", an environment variable HC_<SECTION>_<KEY>
// and a `--set section.key=value` flag; the table in settings.cc is the one list of them.
struct DaemonConfig {
  // [server]
  std::string socketPath = hc::defaultSocketPath();  // socket; aliases HC_SOCKET, --socket
  std::string logLevel = "info";  // log_level: trace|debug|info|warn|error|off; HC_LOG_LEVEL
  // state_dir: where flight records are dumped (systemd's StateDirectory=). Default:
  // $STATE_DIRECTORY, else /var/lib/hetero-comm for root, else $XDG_STATE_HOME/hetero-comm.
  std::string stateDir = hc::defaultStateDir();
  // [session]
  uint64_t segmentBytes = 1ull << 30;      // segment_bytes: default per-client shared segment
  uint64_t maxSegmentBytes = 16ull << 30;  // max_segment_bytes: cap on what a client may request
  uint32_t ringEntries = 256;              // ring_entries: power of two in [16, 4096]
  uint32_t maxClients = 1024;              // max_clients
  // max_ranks: the most ranks a local client may declare for a communicator (a join of more is
  // refused at once); peer::kMaxRanks at most.
  uint32_t maxRanks = 65536;
  // [comm] init_across_uids: ranks of one communicator on this daemon may be processes of
  // different uids. Off: the first rank's uid forms it, and another uid's join is refused.
  bool initAcrossUids = false;
  // max_clients_per_uid: connections one uid may hold at once, so that one user cannot take
  // every slot of max_clients.
  uint32_t maxClientsPerUid = 256;
  // max_segment_bytes_per_uid: the segments of one uid's clients together (the daemon creates
  // them, and pre-faults what they allocate).
  uint64_t maxSegmentBytesPerUid = 64ull << 30;
  // hello_timeout_ms: a connection that has not sent its Hello by then is closed.
  int32_t helloTimeoutMs = 10000;
  static constexpr uint32_t kMaxRanksLimit = 1u << 20;  // peer::kMaxRanks (server.cc checks)
  // max_staging_bytes: host memory the daemon holds at once to stage operands that live in
  // clients' own memory or on devices; an operation that would go beyond it fails with
  // NoResource instead of growing the daemon.
  uint64_t maxStagingBytes = 8ull << 30;
  // cross_memory_attach: clients may have their own (non-segment) memory read and written by the
  // daemon instead of copying it into the segment, through the /proc/self/mem each one hands
  // over (no ptrace rights needed). Off by default: an opt-in on both sides.
  bool crossMemoryAttach = false;
  // [access]
  std::vector<uint32_t> allowUids;  // allow_uids: extra uids (the daemon's uid and root always are)
  std::vector<std::string> allowGroups = {"hetero-comm"};  // allow_groups: members may connect
  std::string socketGroup =
      "hetero-comm";  // socket_group: socket's group when it exists; "" = keep
  // [exec]
  uint32_t reductionThreads = 2;     // reduction_threads: 0 = online CPUs, capped at 16
  uint64_t inlineBytes = 256 << 10;  // inline_bytes: ops moving up to this run on the IPC thread
  uint32_t spinUs = 50;              // spin_us: poll this long after activity before sleeping
  // [comm]
  int32_t initTimeoutMs = 120000;  // init_timeout_ms: deadline for all ranks to join (>0)
  int32_t opTimeoutMs = 0;         // op_timeout_ms: 0 = a late rank is waited for without limit
  // late_report_ms: a communicator whose oldest op has waited this long for a rank logs which
  // ranks have not posted it and dumps its flight record to state_dir (once per stuck op); it
  // keeps waiting. 0 = never.
  int32_t lateReportMs = 300000;
  uint32_t flightRecordEntries = 2000;  // flight_record_entries: ops kept per communicator
  // [peer]: this daemon among the others: the Peer gRPC listener, the cluster token, UCX between
  // daemons and the inter-node algorithm.
  // listen: "host:port" of the Peer listener ("[v6]:port"; port 0 picks a free port). "" = no
  // listener: this daemon serves single-node jobs only.
  std::string peerListen;
  // advertise: "host:port" other daemons and unique ids use to reach the Peer listener. "" = the
  // listen host with the bound port (peerAdvertiseAddress); a wildcard listen host needs it.
  std::string peerAdvertise;
  std::string peerTokenFile = "/etc/hetero-comm/cluster.token";  // token_file: mode 0600
  // socket_ifname (alias HC_SOCKET_IFNAME): interfaces for UCX tcp, NCCL_SOCKET_IFNAME syntax
  // ("eth,ib", "=eth0", "^docker,lo"); "" = every interface.
  std::string peerSocketIfname;
  std::string peerUcxTransports;    // ucx_transports: UCX_TLS; "" = UCX's own choice / UCX_TLS
  uint32_t peerKeepaliveMs = 1000;  // keepalive_ms: UCX keepalive interval (>= 10)
  // silence_timeout_ms: a peer daemon not heard from for this long while an operation needs it
  // is treated as failed; 0 = off.
  uint32_t peerSilenceTimeoutMs = 5000;
  // algo (alias HC_ALGO): allreduce among daemons: auto, ring, rd (= recursive_doubling); any case.
  std::string peerAlgo = "auto";
  uint64_t peerChunkBytes = 512 << 10;  // chunk_bytes: pipeline chunk between daemons (>= 4 KiB)
  // [control]: the operator's gRPC listeners, grpc.health.v1.Health and hetero_comm.v1.Control
  // (daemon/control/control_server.h).
  // admin_socket: Unix socket for hcctl and grpcurl -unix; "" = none. Unless set, it follows the
  // client socket: adminSocketPathFor(socketPath), e.g. ".../hetero-commd-admin.sock".
  std::string controlAdminSocket = hc::adminSocketPathFor(hc::defaultSocketPath());
  // listen: "host:port" of a TCP control listener (port 0: a free port); "" = none. Loopback
  // only, unless the three tls_* files below set up mutual TLS.
  std::string controlListen;
  // health_listen: "host:port" of a plaintext listener that serves Health alone (kubelet gRPC
  // probes carry no credentials); "" = none.
  std::string controlHealthListen;
  // tls_cert_file, tls_key_file (PEM): the TCP control listener speaks TLS with these;
  // tls_client_ca_file: clients must present a certificate signed by it (mutual TLS). With all
  // three, control.listen may bind beyond loopback.
  std::string controlTlsCertFile;
  std::string controlTlsKeyFile;
  std::string controlTlsClientCaFile;
  // [metrics]: listen: "host:port" of the Prometheus /metrics HTTP endpoint (port 0: a free
  // port); "" = none. 9410 is the customary port (beside dcgm-exporter's 9400).
  std::string metricsListen;
  // [devices]: staging_chunk_bytes: device memory moves through host staging in copies of this
  // size (the CPU-forwarding path; every device copy engine gets several in flight).
  uint64_t stagingChunkBytes = 4ull << 20;
  // direct: transfers between daemons lend device memory to the transport in place where the
  // transport moves that memory type and the startup probe passed (staging/direct_probe.h).
  bool devicesDirect = true;
  // legacy_ipc: MemRegister may name device memory by a legacy IPC handle (cudaIpcMemHandle_t,
  // hipIpcMemHandle_t). Such a handle is not bound to the process that made it: a client that
  // learns another process's handle could have the daemon map that memory. false: only VMM
  // memory handed over as an fd (the kernel checks the client holds it) is accepted.
  bool devicesLegacyIpc = true;
  // max_imported_bytes_per_client: the most bytes of device memory one client may have
  // registered (mapped into the daemon) at once; past it MemRegister is refused with
  // NoResource, and libhcclient releases its least recently used idle regions and retries.
  // Bounds a client that registers without end; 0 = no cap. 1 TiB: above any one GPU today.
  uint64_t devicesMaxImportedBytesPerClient = 1ull << 40;
  // measure: time each GPU's copies and reduction kernel on a thread of its own at startup, for
  // the weights hcctl devices, Control.GetNode, /metrics and hc_get_devices() report; false =
  // weights only when an operator asks (hcctl devices --measure).
  bool devicesMeasure = true;
  // [devices.sim]: simulated GPUs (daemon/device/sim) for machines without GPUs: tests, demos,
  // mixed-vendor setups on one machine. The server turns these into device::SimNodeOptions.
  int32_t simNvidia = 0;      // nvidia: sim devices labelled nvidia (0..16)
  int32_t simAmd = 0;         // amd: sim devices labelled amd (0..16)
  double simCopyGbps = 0;     // copy_gbps: simulated copy-engine bandwidth in GB/s; 0 = unlimited
  uint32_t simLatencyUs = 0;  // latency_us: added to every copy and reduction
  // fail_copy_at: the N-th copy on each sim device fails with DeviceError; 0 = off.
  uint32_t simFailCopyAt = 0;
  uint32_t simSlowStreamUs = 0;           // slow_stream_us: extra delay per task on every stream
  uint64_t simMemoryBytes = 16ull << 30;  // memory_bytes: nominal memory each sim device reports
  // nic_direct: the transport may reach sim memory in place (SimDevice::exposeToTransport).
  bool simNicDirect = false;
  // device_mbps: empty, or one speed per sim device (nvidia 0.., then amd 0..) in MB/s (1e6
  // bytes/s) at which it copies and runs kernels, replacing copy_gbps for it: GPUs of different
  // speeds on one node.
  std::vector<uint32_t> simDeviceMbps;

  bool operator==(const DaemonConfig&) const = default;
};

struct LoadOutcome {
  DaemonConfig config;
  bool printConfig = false;  // --print-config: print toToml(config) and exit
  bool checkConfig = false;  // --check-config: the config is valid; exit 0
  bool version = false;      // --version: files and environment were not read
  bool help = false;         // --help: helpText holds the usage; nothing else was read
  std::string helpText;
  int manSection = 0;  // --print-man 8|5: manText holds that page (roff); nothing else was read
  std::string manText;
  std::vector<std::string> sources;  // config files read, in the order they were applied
};

// Parses argv (argv[0] is the program name), reads the files, applies `env` (tests pass their
// own map; main passes processEnvironment()) and validates the result. Every error, including a
// malformed file or flag, is InvalidArgument with a message naming the file, variable or flag and
// the key. When --help, --version or --print-man is given, returns at once with only that set.
[[nodiscard]] hc::Result<LoadOutcome> loadConfig(int argc, const char* const* argv,
                                                 const std::map<std::string, std::string>& env);

// A copy of the process environment (environ).
std::map<std::string, std::string> processEnvironment();

// The configuration as TOML, every key with a one-line comment; loading it gives `config` back.
std::string toToml(const DaemonConfig& config);

// Checks ranges and cross-key rules; the message names the offending key ("exec.spin_us ...").
[[nodiscard]] hc::Status validate(const DaemonConfig& config);

// "4096", "512MiB", "2 G", "64k": K/M/G/T and KiB/MiB/GiB/TiB are all powers of 1024.
[[nodiscard]] hc::Result<uint64_t> parseSize(std::string_view text);

// reductionThreads with 0 resolved to the CPUs this process may run on, capped at 16.
uint32_t resolvedReductionThreads(const DaemonConfig& config);

// Where other daemons reach this daemon's Peer listener once it has bound `boundPort`:
// peerAdvertise when set, otherwise the peerListen host with `boundPort`; "" when peerListen is
// empty (no listener). Expects a config that passed validate().
std::string peerAdvertiseAddress(const DaemonConfig& config, uint16_t boundPort);

}  // namespace hc::config
