// The [control] section: defaults, the admin socket following the client socket, every layer,
// validation naming its key (a non-loopback control.listen is refused), round trip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/paths.h"
#include "daemon/config/daemon_config.h"
#include "tests/unit/daemon/config/config_test_util.h"

namespace hc::config::testing {
namespace {

bool mentions(const hc::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(ControlConfigTest, DefaultsAreTheDocumentedValues) {
  DaemonConfig c;
  EXPECT_EQ(c.controlAdminSocket, hc::adminSocketPathFor(c.socketPath));
  EXPECT_EQ(c.controlListen, "") << "no TCP control listener by default";
  EXPECT_EQ(c.controlHealthListen, "");
  EXPECT_TRUE(validate(c).isOk()) << validate(c).toString();
}

TEST(ControlConfigTest, AdminSocketNameFollowsTheClientSocket) {
  EXPECT_EQ(hc::adminSocketPathFor("/run/hetero-comm/hetero-commd.sock"),
            "/run/hetero-comm/hetero-commd-admin.sock");
  EXPECT_EQ(hc::adminSocketPathFor("/tmp/x/node1.sock"), "/tmp/x/node1-admin.sock");
  EXPECT_EQ(hc::adminSocketPathFor("/tmp/x/plain"), "/tmp/x/plain-admin.sock");
  EXPECT_EQ(hc::adminSocketPathFor("/tmp/.sock"), "/tmp/.sock-admin.sock");
}

TEST(ControlConfigTest, AdminSocketMovesWithSocketFlag) {
  auto r = load({"--socket", "/tmp/hc-t/d.sock"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.controlAdminSocket, "/tmp/hc-t/d-admin.sock");
}

TEST(ControlConfigTest, ExplicitAdminSocketWins) {
  auto r = load({"--socket", "/tmp/hc-t/d.sock", "--admin-socket", "/tmp/hc-t/ctl.sock"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.controlAdminSocket, "/tmp/hc-t/ctl.sock");
  auto off = load({"--set", "control.admin_socket="});
  ASSERT_TRUE(off.isOk()) << off.status().toString();
  EXPECT_EQ(off->config.controlAdminSocket, "") << "empty turns the admin socket off";
}

TEST(ControlConfigTest, FileAndEnvironmentSetEveryKey) {
  TempDir dir;
  std::string file = dir.write("x.toml", R"(
[control]
admin_socket = "/srv/hc/admin.sock"
listen = "127.0.0.1:7600"
health_listen = "0.0.0.0:50052"
)");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.controlAdminSocket, "/srv/hc/admin.sock");
  EXPECT_EQ(r->config.controlListen, "127.0.0.1:7600");
  EXPECT_EQ(r->config.controlHealthListen, "0.0.0.0:50052");

  Env env = {{"HC_CONTROL_LISTEN", "[::1]:0"}, {"HC_CONTROL_HEALTH_LISTEN", "127.0.0.1:0"}};
  auto e = load({}, env);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ(e->config.controlListen, "[::1]:0");
  EXPECT_EQ(e->config.controlHealthListen, "127.0.0.1:0");
}

TEST(ControlConfigTest, NonLoopbackListenIsRefusedForLackOfTls) {
  for (const char* address : {"0.0.0.0:7600", "10.1.2.3:7600", "[::]:7600", "node-1:7600"}) {
    auto r = load({"--set", std::string("control.listen=") + address});
    ASSERT_FALSE(r.isOk()) << address;
    EXPECT_TRUE(mentions(r.status(), "control.listen")) << r.status().toString();
    EXPECT_TRUE(mentions(r.status(), "TLS")) << r.status().toString();
    EXPECT_TRUE(mentions(r.status(), "--set")) << "names where it was set: " << r.status().toString();
  }
  for (const char* address : {"127.0.0.1:0", "localhost:7600", "[::1]:7600", "127.3.4.5:7600"}) {
    auto r = load({"--set", std::string("control.listen=") + address});
    EXPECT_TRUE(r.isOk()) << address << ": " << r.status().toString();
  }
}

// Loopback is an address, not a prefix of the text: names that merely start with "127." resolve
// wherever their owner points them.
TEST(ControlConfigTest, NamesThatLookLikeLoopbackAreNotLoopback) {
  for (const char* address : {"127.example.com:7600", "127.0.0.1.nip.io:7600", "127.:7600",
                              "[::2]:7600", "[::ffff:10.0.0.1]:7600"}) {
    auto r = load({"--set", std::string("control.listen=") + address});
    ASSERT_FALSE(r.isOk()) << address;
    EXPECT_TRUE(mentions(r.status(), "TLS")) << address << ": " << r.status().toString();
  }
}

TEST(ControlConfigTest, MalformedAddressesNameTheirKey) {
  auto listen = load({"--set", "control.listen=127.0.0.1"});
  ASSERT_FALSE(listen.isOk());
  EXPECT_TRUE(mentions(listen.status(), "control.listen")) << listen.status().toString();
  auto health = load({"--set", "control.health_listen=127.0.0.1:99999"});
  ASSERT_FALSE(health.isOk());
  EXPECT_TRUE(mentions(health.status(), "control.health_listen")) << health.status().toString();
  auto same = load({"--socket", "/tmp/a.sock", "--admin-socket", "/tmp/a.sock"});
  ASSERT_FALSE(same.isOk());
  EXPECT_TRUE(mentions(same.status(), "control.admin_socket")) << same.status().toString();
}

TEST(ControlConfigTest, RoundTripsThroughToml) {
  auto r = load({"--socket", "/tmp/hc-t/d.sock", "--set", "control.listen=127.0.0.1:0", "--set",
                 "control.health_listen=127.0.0.1:0"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  TempDir dir;
  std::string file = dir.write("round.toml", toToml(r->config));
  auto back = load({"--config", file});
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->config, r->config);
}

// Remote control needs mutual TLS; TLS files come in pairs and only with a TCP listener.
TEST(ControlConfigTest, TlsKeysGoTogetherAndOpenNonLoopbackOnlyWithClientCertificates) {
  DaemonConfig c;
  c.controlListen = "0.0.0.0:7711";
  c.controlTlsCertFile = "/etc/hetero-comm/tls/server.pem";
  c.controlTlsKeyFile = "/etc/hetero-comm/tls/server.key";
  hc::Status serverOnly = validate(c);
  EXPECT_FALSE(serverOnly.isOk()) << "TLS without client certificates is not enough off the node";
  EXPECT_TRUE(mentions(serverOnly, "mutual TLS")) << serverOnly.toString();
  c.controlTlsClientCaFile = "/etc/hetero-comm/tls/clients-ca.pem";
  EXPECT_TRUE(validate(c).isOk()) << validate(c).toString();

  DaemonConfig keyless = c;
  keyless.controlTlsKeyFile = "";
  EXPECT_TRUE(mentions(validate(keyless), "control.tls_cert_file and control.tls_key_file"))
      << validate(keyless).toString();
  DaemonConfig noListener;
  noListener.controlTlsCertFile = c.controlTlsCertFile;
  noListener.controlTlsKeyFile = c.controlTlsKeyFile;
  EXPECT_TRUE(mentions(validate(noListener), "control.listen is not")) << validate(noListener).toString();
}

TEST(ControlConfigTest, FlightRecorderAndMetricsKeysAreChecked) {
  DaemonConfig c;
  EXPECT_EQ(c.lateReportMs, 300000);
  EXPECT_EQ(c.flightRecordEntries, 2000u);
  EXPECT_EQ(c.metricsListen, "") << "no metrics port unless asked";
  c.flightRecordEntries = 0;
  EXPECT_TRUE(mentions(validate(c), "comm.flight_record_entries")) << validate(c).toString();
  c = DaemonConfig{};
  c.lateReportMs = -1;
  EXPECT_TRUE(mentions(validate(c), "comm.late_report_ms")) << validate(c).toString();
  c = DaemonConfig{};
  c.stateDir = "relative/dir";
  EXPECT_TRUE(mentions(validate(c), "server.state_dir")) << validate(c).toString();
  c = DaemonConfig{};
  c.metricsListen = "no-port";
  EXPECT_TRUE(mentions(validate(c), "metrics.listen")) << validate(c).toString();
  auto r = load({"--set", "metrics.listen=127.0.0.1:9410", "--state-dir", "/srv/hc-state"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.metricsListen, "127.0.0.1:9410");
  EXPECT_EQ(r->config.stateDir, "/srv/hc-state");
}

// systemd's StateDirectory= hands the daemon $STATE_DIRECTORY (colon-separated when several).
TEST(ControlConfigTest, StateDirectoryComesFromSystemdFirst) {
  const char* saved = std::getenv("STATE_DIRECTORY");
  const std::string keep = saved != nullptr ? saved : "";
  ::setenv("STATE_DIRECTORY", "/var/lib/hetero-comm:/var/lib/other", 1);
  EXPECT_EQ(hc::defaultStateDir(), "/var/lib/hetero-comm");
  ::unsetenv("STATE_DIRECTORY");
  EXPECT_FALSE(hc::defaultStateDir().empty());
  EXPECT_EQ(hc::defaultStateDir()[0], '/');
  if (saved != nullptr) ::setenv("STATE_DIRECTORY", keep.c_str(), 1);
}

}  // namespace
}  // namespace hc::config::testing
