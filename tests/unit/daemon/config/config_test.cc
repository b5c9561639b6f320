#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <filesystem>
#include <limits>

#include "daemon/config/daemon_config.h"
#include "daemon/config/logging.h"
#include "tests/unit/daemon/config/config_test_util.h"

namespace hc::config {
namespace {

using testing::Env;
using testing::load;
using testing::TempDir;

TEST(DaemonConfigTest, DefaultsAreTheDocumentedValues) {
  DaemonConfig c;
  EXPECT_EQ(c.socketPath, hc::defaultSocketPath());
  EXPECT_EQ(c.logLevel, "info");
  EXPECT_EQ(c.segmentBytes, 1ull << 30);
  EXPECT_EQ(c.maxSegmentBytes, 16ull << 30);
  EXPECT_EQ(c.ringEntries, 256u);
  EXPECT_EQ(c.maxClients, 1024u);
  EXPECT_TRUE(c.allowUids.empty());
  EXPECT_EQ(c.allowGroups, std::vector<std::string>{"hetero-comm"});
  EXPECT_EQ(c.socketGroup, "hetero-comm");
  EXPECT_EQ(c.reductionThreads, 2u);
  EXPECT_EQ(c.inlineBytes, 256u << 10);
  EXPECT_EQ(c.spinUs, 50u);
  EXPECT_EQ(c.initTimeoutMs, 120000);
  EXPECT_EQ(c.opTimeoutMs, 0);
  EXPECT_TRUE(validate(c).isOk());
}

TEST(LoadConfigTest, EmptyFileGivesDefaults) {
  TempDir dir;
  std::string file = dir.write("hetero-commd.toml", "");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config, DaemonConfig{});
  EXPECT_EQ(r->sources, std::vector<std::string>{file});
  EXPECT_FALSE(r->printConfig || r->checkConfig || r->version || r->help);
}

TEST(LoadConfigTest, MissingDefaultFileIsFine) {
  if (std::filesystem::exists(std::string(kDefaultConfigPath)) ||
      std::filesystem::exists("/etc/hetero-comm/conf.d")) {
    GTEST_SKIP() << "this machine has " << kDefaultConfigPath;
  }
  auto r = load({});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->sources.empty());
  EXPECT_EQ(r->config, DaemonConfig{});
}

TEST(LoadConfigTest, FileOverridesDefaults) {
  TempDir dir;
  std::string file = dir.write("a.toml", R"(
[server]
socket = "/tmp/x.sock"
log_level = "debug"
[session]
ring_entries = 1024
max_clients = 8
[access]
allow_uids = [1000, 1001]
allow_groups = []
socket_group = ""
[comm]
op_timeout_ms = 5000
)");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.socketPath, "/tmp/x.sock");
  EXPECT_EQ(r->config.logLevel, "debug");
  EXPECT_EQ(r->config.ringEntries, 1024u);
  EXPECT_EQ(r->config.maxClients, 8u);
  EXPECT_EQ(r->config.allowUids, (std::vector<uint32_t>{1000, 1001}));
  EXPECT_TRUE(r->config.allowGroups.empty());
  EXPECT_EQ(r->config.socketGroup, "");
  EXPECT_EQ(r->config.opTimeoutMs, 5000);
  EXPECT_EQ(r->config.spinUs, 50u) << "keys the file leaves out keep their defaults";
}

TEST(LoadConfigTest, DropInsApplyAfterTheFileInLexicalOrder) {
  TempDir dir;
  std::string main = dir.write("hetero-commd.toml", "[exec]\nspin_us = 1\nreduction_threads = 4\n");
  std::string b = dir.write("conf.d/20-b.toml", "[exec]\nspin_us = 3\n");
  std::string a =
      dir.write("conf.d/10-a.toml", "[exec]\nspin_us = 2\n[session]\nring_entries = 32\n");
  dir.write("conf.d/.30-hidden.toml", "[exec]\nspin_us = 99\n");
  dir.write("conf.d/40-notes.txt", "not toml at all");
  auto r = load({}, {{"HC_CONFIG", main}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->sources, (std::vector<std::string>{main, a, b}));
  EXPECT_EQ(r->config.spinUs, 3u);
  EXPECT_EQ(r->config.ringEntries, 32u);
  EXPECT_EQ(r->config.reductionThreads, 4u);
}

TEST(LoadConfigTest, ConfigFlagBeatsHcConfig) {
  TempDir dir;
  std::string viaEnv = dir.write("env/x.toml", "[exec]\nspin_us = 1\n");
  std::string viaFlag = dir.write("flag/x.toml", "[exec]\nspin_us = 2\n");
  auto r = load({"--config", viaFlag}, {{"HC_CONFIG", viaEnv}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.spinUs, 2u);
  EXPECT_EQ(r->sources, std::vector<std::string>{viaFlag});
}

TEST(LoadConfigTest, EnvironmentOverridesFile) {
  TempDir dir;
  std::string file = dir.write("x.toml", "[exec]\nspin_us = 1\n[access]\nallow_groups = [\"f\"]\n");
  Env env = {{"HC_CONFIG", file},
             {"HC_EXEC_SPIN_US", "7"},
             {"HC_ACCESS_ALLOW_GROUPS", "a, b"},
             {"HC_ACCESS_ALLOW_UIDS", "1000,1001"},
             {"HC_COMM_INIT_TIMEOUT_MS", "5000"},
             {"HC_SESSION_SEGMENT_BYTES", "64MiB"},
             {"HC_UNRELATED", "ignored: not in a settings section"}};
  auto r = load({}, env);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.spinUs, 7u);
  EXPECT_EQ(r->config.allowGroups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->config.allowUids, (std::vector<uint32_t>{1000, 1001}));
  EXPECT_EQ(r->config.initTimeoutMs, 5000);
  EXPECT_EQ(r->config.segmentBytes, 64ull << 20);
}

TEST(LoadConfigTest, ShortAliasesYieldToFullNames) {
  auto alias = load({}, {{"HC_SOCKET", "/tmp/a.sock"}, {"HC_LOG_LEVEL", "warn"}});
  ASSERT_TRUE(alias.isOk()) << alias.status().toString();
  EXPECT_EQ(alias->config.socketPath, "/tmp/a.sock");
  EXPECT_EQ(alias->config.logLevel, "warn");
  auto both = load({}, {{"HC_SOCKET", "/tmp/a.sock"}, {"HC_SERVER_SOCKET", "/tmp/b.sock"}});
  ASSERT_TRUE(both.isOk()) << both.status().toString();
  EXPECT_EQ(both->config.socketPath, "/tmp/b.sock");
}

TEST(LoadConfigTest, EmptyVariableCountsAsUnset) {
  auto r = load({}, {{"HC_EXEC_SPIN_US", ""}, {"HC_SOCKET", ""}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config, DaemonConfig{});
}

TEST(LoadConfigTest, FlagOverridesEnvironment) {
  Env env = {{"HC_EXEC_SPIN_US", "7"}, {"HC_SOCKET", "/tmp/env.sock"}, {"HC_LOG_LEVEL", "warn"}};
  auto r =
      load({"--spin-us", "9", "--socket=/tmp/flag.sock", "--log-level", "trace", "--segment-bytes",
            "2G", "--max-segment-bytes", "4GiB", "--ring-entries", "64", "--reduction-threads", "0",
            "--inline-bytes", "1k", "--init-timeout-ms", "10", "--op-timeout-ms", "20"},
           env);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.spinUs, 9u);
  EXPECT_EQ(c.socketPath, "/tmp/flag.sock");
  EXPECT_EQ(c.logLevel, "trace");
  EXPECT_EQ(c.segmentBytes, 2ull << 30);
  EXPECT_EQ(c.maxSegmentBytes, 4ull << 30);
  EXPECT_EQ(c.ringEntries, 64u);
  EXPECT_EQ(c.reductionThreads, 0u);
  EXPECT_EQ(c.inlineBytes, 1024u);
  EXPECT_EQ(c.initTimeoutMs, 10);
  EXPECT_EQ(c.opTimeoutMs, 20);
}

TEST(LoadConfigTest, SetReachesEveryKeyAndTheLastOneWins) {
  auto r = load({"--spin-us", "1", "--set", "exec.spin_us=2", "--set=exec.spin_us=3", "--set",
                 "session.max_clients=8", "--set", "access.allow_uids=5,6", "--set",
                 "access.socket_group=", "--set", "server.socket=/tmp/a=b.sock"},
                {{"HC_SESSION_MAX_CLIENTS", "4"}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.spinUs, 3u);
  EXPECT_EQ(r->config.maxClients, 8u);
  EXPECT_EQ(r->config.allowUids, (std::vector<uint32_t>{5, 6}));
  EXPECT_EQ(r->config.socketGroup, "");
  EXPECT_EQ(r->config.socketPath, "/tmp/a=b.sock");
}

TEST(ParseSizeTest, AcceptsPlainNumbersAndBinarySuffixes) {
  const std::pair<const char*, uint64_t> kCases[] = {
      {"0", 0},           {"4096", 4096},         {"4096B", 4096},     {"1K", 1024},
      {"64k", 64 << 10},  {"512MiB", 512 << 20},  {"2 G", 2ull << 30}, {"3gib", 3ull << 30},
      {"1T", 1ull << 40}, {" 16 MiB ", 16 << 20}, {"1M", 1 << 20}};
  for (auto [text, want] : kCases) {
    auto r = parseSize(text);
    ASSERT_TRUE(r.isOk()) << text << ": " << r.status().toString();
    EXPECT_EQ(*r, want) << text;
  }
  for (const char* bad :
       {"", "MiB", "-1", "1.5G", "1KB", "1 X", "0x10", "99999999999999999999", "17179869184T"}) {
    auto r = parseSize(bad);
    EXPECT_FALSE(r.isOk()) << "'" << bad << "' parsed";
    EXPECT_EQ(r.status().code(), hc::Code::InvalidArgument);
  }
}

TEST(LoadConfigTest, SizesAcceptSuffixesInFilesToo) {
  TempDir dir;
  std::string file = dir.write("x.toml",
                               "[session]\nsegment_bytes = \"512MiB\"\nmax_segment_bytes = "
                               "1073741824\n[exec]\ninline_bytes = \"64K\"\n");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.segmentBytes, 512ull << 20);
  EXPECT_EQ(r->config.maxSegmentBytes, 1ull << 30);
  EXPECT_EQ(r->config.inlineBytes, 64u << 10);
}

TEST(ToTomlTest, ReloadsToAnEqualConfig) {
  TempDir dir;
  const std::string weird = dir.path() + "/we\"ird\\ \t.sock";
  auto r = load({"--socket", weird, "--set", "access.allow_groups=a b,c\"d", "--set",
                 "access.allow_uids=0,4294967295", "--set",
                 "session.max_segment_bytes=18446744073709551615", "--segment-bytes", "5000",
                 "--reduction-threads", "0", "--set", "session.max_clients=1", "--op-timeout-ms",
                 "2147483647", "--log-level", "off"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  for (const DaemonConfig& want : {DaemonConfig{}, r->config}) {
    std::string text = toToml(want);
    std::string file = dir.write("printed.toml", text);
    auto again = load({"--config", file});
    ASSERT_TRUE(again.isOk()) << again.status().toString() << "\n" << text;
    EXPECT_EQ(again->config, want) << text;
  }
  std::string text = toToml(DaemonConfig{});
  EXPECT_NE(text.find("segment_bytes = 1073741824  # 1 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("[comm]"), std::string::npos) << text;
}

TEST(LoadConfigTest, ModeFlagsAreReported) {
  auto r = load({"--print-config", "--check-config"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->printConfig);
  EXPECT_TRUE(r->checkConfig);
  EXPECT_FALSE(r->version);
}

TEST(LoadConfigTest, HelpAndVersionSkipTheFiles) {
  Env broken = {{"HC_CONFIG", "/nonexistent/hetero-commd.toml"}, {"HC_EXEC_SPIN_US", "x"}};
  auto help = load({"--help"}, broken);
  ASSERT_TRUE(help.isOk()) << help.status().toString();
  EXPECT_TRUE(help->help);
  EXPECT_NE(help->helpText.find("--segment-bytes"), std::string::npos) << help->helpText;
  EXPECT_NE(help->helpText.find("HC_EXEC_SPIN_US"), std::string::npos) << help->helpText;
  auto version = load({"--version"}, broken);
  ASSERT_TRUE(version.isOk()) << version.status().toString();
  EXPECT_TRUE(version->version);
}

// The pages the build installs: hetero-commd(8) from the options --help lists, and
// hetero-commd.toml(5) with every key at the system daemon's default, whoever runs it.
TEST(LoadConfigTest, PrintManSkipsTheFilesAndIsHiddenFromHelp) {
  Env broken = {{"HC_CONFIG", "/nonexistent/hetero-commd.toml"}, {"HC_EXEC_SPIN_US", "x"}};
  auto man8 = load({"--print-man", "8"}, broken);
  ASSERT_TRUE(man8.isOk()) << man8.status().toString();
  EXPECT_EQ(man8->manSection, 8);
  EXPECT_EQ(man8->manText.find(".TH \"HETERO\\-COMMD\" \"8\""), 0u) << man8->manText;
  EXPECT_NE(man8->manText.find("\\fB\\-\\-segment\\-bytes\\fR \\fISIZE\\fR"), std::string::npos)
      << man8->manText;
  EXPECT_EQ(man8->manText.find("print\\-man"), std::string::npos) << man8->manText;

  auto man5 = load({"--print-man", "5"}, broken);
  ASSERT_TRUE(man5.isOk()) << man5.status().toString();
  const std::string& page = man5->manText;
  EXPECT_NE(page.find(".SH \"[devices.sim]\"\n.TP\n\\fBnvidia\\fR = 0\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("\\fBsocket\\fR = \"/run/hetero\\-comm/hetero\\-commd.sock\"\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("\\fBsegment_bytes\\fR = 1073741824 (1 GiB)\n"), std::string::npos) << page;
  EXPECT_NE(page.find("Environment: \\fBHC_SERVER_SOCKET\\fR, or \\fBHC_SOCKET\\fR"),
            std::string::npos)
      << page;

  EXPECT_FALSE(load({"--print-man", "7"}).isOk());
  auto help = load({"--help"});
  ASSERT_TRUE(help.isOk()) << help.status().toString();
  EXPECT_EQ(help->helpText.find("--print-man"), std::string::npos) << help->helpText;
}

TEST(LoggingTest, ParsesTheDocumentedLevels) {
  EXPECT_EQ(*parseLogLevel("trace"), spdlog::level::trace);
  EXPECT_EQ(*parseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(*parseLogLevel("error"), spdlog::level::err);
  EXPECT_EQ(*parseLogLevel("off"), spdlog::level::off);
  EXPECT_EQ(parseLogLevel("loud").status().code(), hc::Code::InvalidArgument);
}

TEST(LoggingTest, SetupInstallsTheDefaultLogger) {
  setupLogging("debug");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  setupLogging("nonsense");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
}

TEST(DaemonConfigTest, ZeroReductionThreadsMeansOnePerCpuUpTo16) {
  DaemonConfig c;
  c.reductionThreads = 0;
  uint32_t n = resolvedReductionThreads(c);
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, 16u);
  c.reductionThreads = 3;
  EXPECT_EQ(resolvedReductionThreads(c), 3u);
}

}  // namespace
}  // namespace hc::config

namespace hc::config::testing {
namespace {

TEST(LoadConfigTest, CrossMemoryAttachIsOffUnlessAskedForInAnySource) {
  EXPECT_FALSE(DaemonConfig{}.crossMemoryAttach);
  TempDir dir;
  std::string on = dir.write("on.toml", "[session]\ncross_memory_attach = true\n");
  auto file = load({"--config", on});
  ASSERT_TRUE(file.isOk()) << file.status().toString();
  EXPECT_TRUE(file->config.crossMemoryAttach);
  auto env = load({"--config", on}, {{"HC_SESSION_CROSS_MEMORY_ATTACH", "off"}});
  ASSERT_TRUE(env.isOk()) << env.status().toString();
  EXPECT_FALSE(env->config.crossMemoryAttach) << "the environment beats the file";
  auto flag = load({"--cross-memory-attach", "yes"}, {{"HC_SESSION_CROSS_MEMORY_ATTACH", "0"}});
  ASSERT_TRUE(flag.isOk()) << flag.status().toString();
  EXPECT_TRUE(flag->config.crossMemoryAttach) << "the flag beats the environment";
  auto bad = load({}, {{"HC_SESSION_CROSS_MEMORY_ATTACH", "maybe"}});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("session.cross_memory_attach"), std::string::npos)
      << bad.status().message();
  std::string wrongType = dir.write("w.toml", "[session]\ncross_memory_attach = 1\n");
  EXPECT_FALSE(load({"--config", wrongType}).isOk()) << "TOML wants a boolean";
}

}  // namespace
}  // namespace hc::config::testing
