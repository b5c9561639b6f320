// The [peer] section: defaults, every layer and alias, validation naming its key, round trip.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "tests/unit/daemon/config/config_test_util.h"

namespace hc::config::testing {
namespace {

bool mentions(const hc::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(PeerConfigTest, DefaultsAreTheDocumentedValues) {
  DaemonConfig c;
  EXPECT_EQ(c.peerListen, "") << "no Peer listener: single-node jobs only";
  EXPECT_EQ(c.peerAdvertise, "");
  EXPECT_EQ(c.peerTokenFile, "/etc/hetero-comm/cluster.token");
  EXPECT_EQ(c.peerSocketIfname, "");
  EXPECT_EQ(c.peerUcxTransports, "");
  EXPECT_EQ(c.peerKeepaliveMs, 1000u);
  EXPECT_EQ(c.peerSilenceTimeoutMs, 5000u);
  EXPECT_EQ(c.peerAlgo, "auto");
  EXPECT_EQ(c.peerChunkBytes, 512u << 10);
  EXPECT_TRUE(validate(c).isOk()) << validate(c).toString();
}

TEST(PeerConfigTest, FileSetsEveryKey) {
  TempDir dir;
  std::string file = dir.write("x.toml", R"(
[peer]
listen = "0.0.0.0:7000"
advertise = "node-1.cluster:7000"
token_file = "/srv/token"
socket_ifname = "^docker,lo"
ucx_transports = "tcp,self"
keepalive_ms = 200
silence_timeout_ms = 0
algo = "ring"
chunk_bytes = "1MiB"
)");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.peerListen, "0.0.0.0:7000");
  EXPECT_EQ(c.peerAdvertise, "node-1.cluster:7000");
  EXPECT_EQ(c.peerTokenFile, "/srv/token");
  EXPECT_EQ(c.peerSocketIfname, "^docker,lo");
  EXPECT_EQ(c.peerUcxTransports, "tcp,self");
  EXPECT_EQ(c.peerKeepaliveMs, 200u);
  EXPECT_EQ(c.peerSilenceTimeoutMs, 0u);
  EXPECT_EQ(c.peerAlgo, "ring");
  EXPECT_EQ(c.peerChunkBytes, 1u << 20);
}

TEST(PeerConfigTest, EnvironmentSetsEveryKey) {
  Env env = {{"HC_PEER_LISTEN", "[::1]:0"},           {"HC_PEER_ADVERTISE", "[::1]:7001"},
             {"HC_PEER_TOKEN_FILE", "/run/token"},    {"HC_PEER_SOCKET_IFNAME", "=eth0"},
             {"HC_PEER_UCX_TRANSPORTS", "tcp"},       {"HC_PEER_KEEPALIVE_MS", "10"},
             {"HC_PEER_SILENCE_TIMEOUT_MS", "30000"}, {"HC_PEER_ALGO", "RD"},
             {"HC_PEER_CHUNK_BYTES", "64K"}};
  auto r = load({}, env);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.peerListen, "[::1]:0");
  EXPECT_EQ(c.peerAdvertise, "[::1]:7001");
  EXPECT_EQ(c.peerTokenFile, "/run/token");
  EXPECT_EQ(c.peerSocketIfname, "=eth0");
  EXPECT_EQ(c.peerUcxTransports, "tcp");
  EXPECT_EQ(c.peerKeepaliveMs, 10u);
  EXPECT_EQ(c.peerSilenceTimeoutMs, 30000u);
  EXPECT_EQ(c.peerAlgo, "RD");
  EXPECT_EQ(c.peerChunkBytes, 64u << 10);
}

TEST(PeerConfigTest, FlagBeatsEnvironmentBeatsFile) {
  TempDir dir;
  std::string file = dir.write("x.toml", "[peer]\nalgo = \"ring\"\nkeepalive_ms = 100\n");
  auto fromFile = load({"--config", file});
  ASSERT_TRUE(fromFile.isOk()) << fromFile.status().toString();
  EXPECT_EQ(fromFile->config.peerAlgo, "ring");

  Env env = {{"HC_PEER_ALGO", "rd"}, {"HC_PEER_KEEPALIVE_MS", "200"}};
  auto fromEnv = load({"--config", file}, env);
  ASSERT_TRUE(fromEnv.isOk()) << fromEnv.status().toString();
  EXPECT_EQ(fromEnv->config.peerAlgo, "rd");
  EXPECT_EQ(fromEnv->config.peerKeepaliveMs, 200u);

  auto fromFlag =
      load({"--config", file, "--set", "peer.algo=auto", "--set", "peer.keepalive_ms=300"}, env);
  ASSERT_TRUE(fromFlag.isOk()) << fromFlag.status().toString();
  EXPECT_EQ(fromFlag->config.peerAlgo, "auto");
  EXPECT_EQ(fromFlag->config.peerKeepaliveMs, 300u);
}

TEST(PeerConfigTest, ShortAliasesYieldToFullNamesAndFlags) {
  auto alias = load({}, {{"HC_SOCKET_IFNAME", "eth,ib"}, {"HC_ALGO", "recursive_doubling"}});
  ASSERT_TRUE(alias.isOk()) << alias.status().toString();
  EXPECT_EQ(alias->config.peerSocketIfname, "eth,ib");
  EXPECT_EQ(alias->config.peerAlgo, "recursive_doubling");

  auto both = load({}, {{"HC_SOCKET_IFNAME", "eth"},
                        {"HC_PEER_SOCKET_IFNAME", "ib"},
                        {"HC_ALGO", "ring"},
                        {"HC_PEER_ALGO", "rd"}});
  ASSERT_TRUE(both.isOk()) << both.status().toString();
  EXPECT_EQ(both->config.peerSocketIfname, "ib");
  EXPECT_EQ(both->config.peerAlgo, "rd");

  auto flag = load({"--set", "peer.algo=auto"}, {{"HC_ALGO", "ring"}});
  ASSERT_TRUE(flag.isOk()) << flag.status().toString();
  EXPECT_EQ(flag->config.peerAlgo, "auto");

  auto empty = load({}, {{"HC_ALGO", ""}, {"HC_SOCKET_IFNAME", ""}});
  ASSERT_TRUE(empty.isOk()) << empty.status().toString();
  EXPECT_EQ(empty->config, DaemonConfig{}) << "an empty alias counts as unset";
}

TEST(PeerConfigTest, AcceptsEveryDocumentedForm) {
  auto ok = [](void (*mutate)(DaemonConfig*), const char* what) {
    DaemonConfig c;
    mutate(&c);
    EXPECT_TRUE(validate(c).isOk()) << what << ": " << validate(c).toString();
  };
  ok([](DaemonConfig* c) { c->peerListen = "127.0.0.1:0"; }, "port 0");
  ok([](DaemonConfig* c) { c->peerListen = "node-1.example_x:65535"; }, "DNS name");
  ok([](DaemonConfig* c) { c->peerListen = "[::1]:5000"; }, "IPv6");
  ok(
      [](DaemonConfig* c) {
        c->peerListen = "0.0.0.0:0";
        c->peerAdvertise = "10.0.0.7:5000";
      },
      "wildcard with advertise");
  ok(
      [](DaemonConfig* c) {
        c->peerListen = "[::]:5000";
        c->peerAdvertise = "[fe80::1]:5000";
      },
      "IPv6 wildcard with advertise");
  ok([](DaemonConfig* c) { c->peerAlgo = "Recursive_Doubling"; }, "any case");
  ok([](DaemonConfig* c) { c->peerAlgo = "RING"; }, "any case");
  ok([](DaemonConfig* c) { c->peerKeepaliveMs = 10; }, "keepalive edge");
  ok([](DaemonConfig* c) { c->peerSilenceTimeoutMs = 0; }, "silence off");
  ok([](DaemonConfig* c) { c->peerChunkBytes = 4096; }, "chunk edge");
  ok([](DaemonConfig* c) { c->peerTokenFile.clear(); }, "no token needed without a listener");
}

TEST(PeerConfigTest, EveryValidationErrorNamesItsKey) {
  struct Case {
    void (*mutate)(DaemonConfig*);
    const char* key;
  };
  const Case kCases[] = {
      {[](DaemonConfig* c) { c->peerListen = "5000"; }, "peer.listen"},
      {[](DaemonConfig* c) { c->peerListen = "host:"; }, "peer.listen"},
      {[](DaemonConfig* c) { c->peerListen = "host:65536"; }, "peer.listen"},
      {[](DaemonConfig* c) { c->peerListen = ":5000"; }, "peer.listen"},
      {[](DaemonConfig* c) { c->peerListen = "::1:5000"; }, "peer.listen"},
      {[](DaemonConfig* c) { c->peerListen = "0.0.0.0:5000"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerListen = "[::]:0"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerListen = "[0:0::0]:0"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerListen = std::string(100, 'h') + ":1"; }, "peer.listen"},
      {[](DaemonConfig* c) {
         c->peerListen = "127.0.0.1:0";
         c->peerTokenFile.clear();
       },
       "peer.token_file"},
      {[](DaemonConfig* c) { c->peerAdvertise = "node:0"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerAdvertise = "0.0.0.0:5000"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerAdvertise = "no-port"; }, "peer.advertise"},
      {[](DaemonConfig* c) { c->peerAdvertise = std::string(100, 'h') + ":5000"; },
       "peer.advertise"},
      {[](DaemonConfig* c) { c->peerKeepaliveMs = 9; }, "peer.keepalive_ms"},
      {[](DaemonConfig* c) { c->peerKeepaliveMs = 0; }, "peer.keepalive_ms"},
      {[](DaemonConfig* c) { c->peerAlgo = "tree"; }, "peer.algo"},
      {[](DaemonConfig* c) { c->peerAlgo = ""; }, "peer.algo"},
      {[](DaemonConfig* c) { c->peerChunkBytes = 4095; }, "peer.chunk_bytes"},
  };
  for (const Case& c : kCases) {
    DaemonConfig config;
    c.mutate(&config);
    hc::Status s = validate(config);
    EXPECT_EQ(s.code(), hc::Code::InvalidArgument) << c.key << " accepted";
    EXPECT_TRUE(mentions(s, c.key)) << "'" << s.message() << "' does not name " << c.key;
  }
}

TEST(PeerConfigTest, LoadErrorsNameTheKeyAndWhereItWasSet) {
  struct Case {
    std::vector<std::string> args;
    Env env;
    std::vector<std::string> want;
  };
  const Case kCases[] = {
      {{}, {{"HC_PEER_KEEPALIVE_MS", "5"}}, {"peer.keepalive_ms", "HC_PEER_KEEPALIVE_MS"}},
      {{}, {{"HC_ALGO", "fastest"}}, {"peer.algo", "fastest", "HC_ALGO"}},
      {{"--set", "peer.chunk_bytes=1K"}, {}, {"peer.chunk_bytes", "--set peer.chunk_bytes=1K"}},
      {{"--set", "peer.listen=0.0.0.0:0"}, {}, {"peer.advertise", "--set peer.listen"}},
      {{}, {{"HC_PEER_KEEPALIVE_MS", "soon"}}, {"peer.keepalive_ms", "HC_PEER_KEEPALIVE_MS"}},
      {{}, {{"HC_PEER_LISTN", "x:1"}}, {"HC_PEER_LISTN", "peer.listn"}},
      {{"--set", "peer.chunk=1"}, {}, {"peer.chunk"}},
  };
  for (const Case& c : kCases) {
    auto r = load(c.args, c.env);
    ASSERT_FALSE(r.isOk()) << c.want.front() << " loaded";
    EXPECT_EQ(r.status().code(), hc::Code::InvalidArgument);
    for (const std::string& want : c.want) {
      EXPECT_TRUE(mentions(r.status(), want)) << "'" << r.status().message() << "' lacks " << want;
    }
  }
  TempDir dir;
  std::string file = dir.write("x.toml", "[peer]\nkeepalive_ms = \"1s\"\n");
  auto wrongType = load({"--config", file});
  ASSERT_FALSE(wrongType.isOk());
  EXPECT_TRUE(mentions(wrongType.status(), "peer.keepalive_ms")) << wrongType.status().message();
  EXPECT_TRUE(mentions(wrongType.status(), file)) << wrongType.status().message();
}

TEST(PeerConfigTest, ToTomlReloadsToAnEqualConfig) {
  auto r = load({"--set", "peer.listen=[::]:0", "--set", "peer.advertise=[fd00::7]:7000", "--set",
                 "peer.token_file=/etc/hc \"quoted\".token", "--set",
                 "peer.socket_ifname=^=docker0", "--set", "peer.ucx_transports=rc,tcp,self",
                 "--set", "peer.keepalive_ms=4294967295", "--set", "peer.silence_timeout_ms=0",
                 "--set", "peer.algo=Rd", "--set", "peer.chunk_bytes=4097"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  TempDir dir;
  for (const DaemonConfig& want : {DaemonConfig{}, r->config}) {
    std::string text = toToml(want);
    std::string file = dir.write("printed.toml", text);
    auto again = load({"--config", file});
    ASSERT_TRUE(again.isOk()) << again.status().toString() << "\n" << text;
    EXPECT_EQ(again->config, want) << text;
  }
  std::string text = toToml(DaemonConfig{});
  EXPECT_NE(text.find("\n[peer]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("chunk_bytes = 524288  # 512 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("token_file = \"/etc/hetero-comm/cluster.token\""), std::string::npos);
  EXPECT_NE(text.find("HC_SOCKET_IFNAME"), std::string::npos) << "the alias is in the comment";
}

TEST(PeerConfigTest, AdvertiseAddressIsAdvertiseOrTheListenHostWithTheBoundPort) {
  DaemonConfig c;
  EXPECT_EQ(peerAdvertiseAddress(c, 5000), "") << "no listener";
  c.peerListen = "10.1.2.3:0";
  EXPECT_EQ(peerAdvertiseAddress(c, 41234), "10.1.2.3:41234");
  c.peerListen = "[fd00::1]:0";
  EXPECT_EQ(peerAdvertiseAddress(c, 41234), "[fd00::1]:41234");
  c.peerAdvertise = "gateway:7000";
  EXPECT_EQ(peerAdvertiseAddress(c, 41234), "gateway:7000");
}

}  // namespace
}  // namespace hc::config::testing
