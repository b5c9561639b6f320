// Seeds of the configuration, UCX wire and notices targets: a file, an environment and a command
// line per section of the configuration (and per alias and mode), every UCX control message
// kind and an address, every notice kind. Each is parsed by the real code and must be accepted.
#include <cstring>
#include <sstream>
#include <string_view>
#include <utility>

#include "daemon/discovery/pci_ids.h"
#include "daemon/session/notices.h"
#include "daemon/transport/ucx/ucx_wire.h"
#include "tests/fuzz/config_fixture.h"
#include "tests/fuzz/fuzz_inputs.h"
#include "tests/fuzz/seeds.h"

namespace hc::fuzz {
namespace {

std::vector<uint8_t> bytesOf(std::string_view text) { return {text.begin(), text.end()}; }

template <typename T>
std::vector<uint8_t> bytesOf(const T& value) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &value, sizeof(T));
  return b;
}

void addToml(std::vector<Seed>* seeds, const std::string& name, std::string_view text) {
  Seed seed{"config_toml", name, bytesOf(text)};
  MemFile file;
  file.write(text);
  auto loaded = loadWith({"--config", file.path()}, {});
  requireValid(loaded.isOk(), seed, loaded.status().message());
  seeds->push_back(std::move(seed));
}

void addEnv(std::vector<Seed>* seeds, const std::string& name, std::string_view text) {
  Seed seed{"config_env", name, bytesOf(text)};
  Env env = emptyConfigEnv();
  for (const std::string& line : readLines(seed.bytes)) {
    const size_t eq = line.find('=');
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  auto loaded = loadWith({}, env);
  requireValid(loaded.isOk(), seed, loaded.status().message());
  seeds->push_back(std::move(seed));
}

void addFlags(std::vector<Seed>* seeds, const std::string& name, std::string_view text) {
  Seed seed{"config_flags", name, bytesOf(text)};
  auto loaded = loadWith(readLines(seed.bytes), emptyConfigEnv());
  requireValid(loaded.isOk(), seed, loaded.status().message());
  seeds->push_back(std::move(seed));
}

void configSeeds(std::vector<Seed>* seeds) {
  addToml(seeds, "server",
          "[server]\nsocket = \"/tmp/hc.sock\"\nlog_level = \"debug\"\n"
          "state_dir = \"/tmp/hc-state\"\n");
  addToml(seeds, "session",
          "[session]\nsegment_bytes = \"64MiB\"\nmax_segment_bytes = 1073741824\n"
          "ring_entries = 512\nmax_clients = 8\ncross_memory_attach = true\n");
  addToml(seeds, "access",
          "[access]\nallow_uids = [1000, 1001]\nallow_groups = [\"video\"]\n"
          "socket_group = \"\"\n");
  addToml(seeds, "exec", "[exec]\nreduction_threads = 4\ninline_bytes = \"128K\"\nspin_us = 20\n");
  addToml(seeds, "comm",
          "[comm]\ninit_timeout_ms = 60000\nop_timeout_ms = 5000\n"
          "late_report_ms = 0\nflight_record_entries = 100\n");
  addToml(seeds, "peer",
          "[peer]\nlisten = \"0.0.0.0:7710\"\nadvertise = \"node1:7710\"\n"
          "token_file = \"/etc/hetero-comm/cluster.token\"\n"
          "socket_ifname = \"^docker,lo\"\nucx_transports = \"tcp\"\n"
          "keepalive_ms = 500\nsilence_timeout_ms = 3000\nalgo = \"ring\"\n"
          "chunk_bytes = \"1MiB\"\n");
  addToml(seeds, "control",
          "[control]\nadmin_socket = \"/tmp/hc-admin.sock\"\n"
          "listen = \"127.0.0.1:0\"\nhealth_listen = \"0.0.0.0:7711\"\n");
  addToml(seeds, "metrics", "[metrics]\nlisten = \"127.0.0.1:9410\"\n");
  addToml(seeds, "devices",
          "[devices]\nstaging_chunk_bytes = \"8MiB\"\ndirect = false\n\n"
          "[devices.sim]\nnvidia = 2\namd = 1\ncopy_gbps = 12.5\n"
          "latency_us = 5\nfail_copy_at = 3\nslow_stream_us = 0\n"
          "memory_bytes = \"8GiB\"\nnic_direct = true\n");

  addEnv(seeds, "server", "HC_SERVER_SOCKET=/tmp/hc.sock\nHC_SERVER_LOG_LEVEL=warn\n");
  addEnv(seeds, "aliases",
         "HC_SOCKET=/tmp/hc2.sock\nHC_LOG_LEVEL=error\n"
         "HC_SOCKET_IFNAME==eth0\nHC_ALGO=RD\n");
  addEnv(seeds, "session",
         "HC_SESSION_SEGMENT_BYTES=256M\nHC_SESSION_RING_ENTRIES=64\n"
         "HC_SESSION_CROSS_MEMORY_ATTACH=true\n");
  addEnv(seeds, "access", "HC_ACCESS_ALLOW_UIDS=0,1000\nHC_ACCESS_ALLOW_GROUPS=a,b\n");
  addEnv(seeds, "exec_comm", "HC_EXEC_SPIN_US=0\nHC_COMM_OP_TIMEOUT_MS=100\n");
  addEnv(seeds, "peer",
         "HC_PEER_LISTEN=[::1]:0\nHC_PEER_KEEPALIVE_MS=20\n"
         "HC_PEER_CHUNK_BYTES=64KiB\n");
  addEnv(seeds, "control_metrics",
         "HC_CONTROL_LISTEN=127.0.0.1:0\n"
         "HC_METRICS_LISTEN=127.0.0.1:0\n");
  addEnv(seeds, "devices_sim",
         "HC_DEVICES_DIRECT=false\nHC_DEVICES_SIM_NVIDIA=1\n"
         "HC_DEVICES_SIM_AMD=1\nHC_DEVICES_SIM_COPY_GBPS=2.5\n");

  addFlags(seeds, "flags",
           "--socket\n/tmp/hc.sock\n--log-level\ntrace\n--segment-bytes\n32M\n"
           "--ring-entries\n128\n--spin-us\n10\n--reduction-threads\n0\n");
  addFlags(seeds, "set",
           "--set\npeer.algo=ring\n--set\ndevices.sim.amd=2\n"
           "--set\naccess.allow_uids=5,6\n--set\ndevices.sim.copy_gbps=1e1\n");
  addFlags(seeds, "print_config", "--print-config\n--cross-memory-attach\ntrue\n");
  addFlags(seeds, "check_config", "--check-config\n--init-timeout-ms=1000\n");
  addFlags(seeds, "help", "--help\n");
  addFlags(seeds, "version", "--version\n");
}

void addWire(std::vector<Seed>* seeds, const std::string& name, std::vector<uint8_t> bytes,
             bool address) {
  Seed seed{"ucx_wire", name, std::move(bytes)};
  const bool ok = address ? transport::ucx::decodeAddress(seed.bytes).has_value()
                          : transport::ucx::parseControl(seed.bytes).has_value();
  requireValid(ok, seed, "refused");
  seeds->push_back(std::move(seed));
}

void wireSeeds(std::vector<Seed>* seeds) {
  using namespace transport::ucx;
  const Secret secret = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  HelloMessage hello;
  hello.stamp = 42;
  hello.uuid = 0x1122334455667788ull;
  hello.secret = secret;
  addWire(seeds, "hello", bytesOf(hello), false);
  const transport::Tag tag = transport::makeTag(0xabcdef, 17, 3);
  std::vector<uint8_t> inlined = bytesOf(makeHeader(ControlKind::Inline, tag, 5, secret));
  for (uint8_t b : {1, 2, 3, 4, 5}) inlined.push_back(b);
  addWire(seeds, "inline", inlined, false);
  addWire(seeds, "header", bytesOf(makeHeader(ControlKind::Header, tag, 1 << 20, secret)), false);
  // A later version's longer header: the fields this one knows, 8 bytes more, then the payload.
  MessageHeader longer = makeHeader(ControlKind::Inline, tag, 2, secret);
  longer.headerBytes = sizeof(MessageHeader) + 8;
  std::vector<uint8_t> extended = bytesOf(longer);
  extended.resize(longer.headerBytes, 0xee);
  extended.push_back(9);
  extended.push_back(8);
  addWire(seeds, "inline_longer_header", extended, false);
  const uint8_t worker[] = {0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80};
  addWire(seeds, "address", encodeAddress(0x0123456789abcdefull, secret, worker), true);
}

void noticeSeeds(std::vector<Seed>* seeds) {
  using namespace session;
  // Ranks 0 and 2 on the daemon the notice came from, 1 and 3 here, 4 elsewhere.
  const std::vector<uint8_t> where = {1, 0, 1, 0, 2};
  auto add = [&](const std::string& name, const std::vector<uint8_t>& notice) {
    Seed seed{"notices", name, writeNoticeInput(where, notice)};
    auto input = readNoticeInput(seed.bytes);
    const bool ok =
        input && (noticeKind(input->notice) == kNoticeFailure
                      ? !failureText(input->notice).empty()
                      : decodeGoodbye(input->notice, input->senders, input->local).isOk());
    requireValid(ok, seed, "refused");
    seeds->push_back(std::move(seed));
  };
  add("failure", encodeFailureNotice(unavailable("rank 2: a peer daemon failed")));
  add("goodbye", encodeGoodbye({{0, 1, 3}, {2, 3, 1ull << 40}}));
  add("goodbye_empty", encodeGoodbye({}));
  add("goodbye_incomplete",
      encodeGoodbye(std::vector<Communicator::SentCount>(200, Communicator::SentCount{2, 1, 1})));
}

// [u16 vendor id][pci.ids text] (pci_ids_fuzz.cc): the vendor must be found.
void addPciIds(std::vector<Seed>* seeds, const std::string& name, uint16_t vendorId,
               const std::string& text) {
  Seed seed{"pci_ids", name, {static_cast<uint8_t>(vendorId), static_cast<uint8_t>(vendorId >> 8)}};
  seed.bytes.insert(seed.bytes.end(), text.begin(), text.end());
  std::istringstream file(text);
  requireValid(discovery::readPciIdVendor(file, vendorId).has_value(), seed, "vendor not found");
  seeds->push_back(std::move(seed));
}

void pciIdsSeeds(std::vector<Seed>* seeds) {
  const std::string file =
      "# pci.ids excerpt\n"
      "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
      "\t74a1  Aqua Vanjaram [Instinct MI300X]\n"
      "10de  NVIDIA Corporation\n"
      "\t20b2  GA100 [A100 SXM4 80GB]\n"
      "\t\t10de 1463  A100-SXM4-80GB\n"
      "\t2330  GH100 [H100 SXM5 80GB]\n"
      "8086  Intel Corporation\n"
      "\t0bd5  Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]\n"
      "C 03  Display controller\n"
      "\t00  VGA compatible controller\n";
  addPciIds(seeds, "nvidia", 0x10de, file);
  addPciIds(seeds, "amd", 0x1002, file);
  addPciIds(seeds, "intel_crlf", 0x8086,
            "8086  Intel Corporation\r\n\t56c0  ATS-M [Data Center GPU Flex 170]\r\n");
}

}  // namespace

std::vector<Seed> daemonSeeds() {
  std::vector<Seed> seeds;
  configSeeds(&seeds);
  wireSeeds(&seeds);
  noticeSeeds(&seeds);
  pciIdsSeeds(&seeds);
  return seeds;
}

}  // namespace hc::fuzz
