// The [devices.sim] section: defaults, the nested TOML table, every layer (file, environment,
// --set), validation naming its key and origin, and the round trip through toToml.
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

TEST(SimConfigTest, DefaultsAreNoSimDevices) {
  DaemonConfig c;
  EXPECT_EQ(c.simNvidia, 0);
  EXPECT_EQ(c.simAmd, 0);
  EXPECT_EQ(c.simCopyGbps, 0.0) << "0 = unlimited";
  EXPECT_EQ(c.simLatencyUs, 0u);
  EXPECT_EQ(c.simFailCopyAt, 0u) << "no fault";
  EXPECT_EQ(c.simSlowStreamUs, 0u);
  EXPECT_EQ(c.simMemoryBytes, 16ull << 30);
  EXPECT_TRUE(validate(c).isOk()) << validate(c).toString();
}

TEST(SimConfigTest, FileSetsEveryKeyInTheNestedTable) {
  TempDir dir;
  std::string file = dir.write("x.toml", R"(
[devices.sim]
nvidia = 2
amd = 3
copy_gbps = 12.5
latency_us = 40
fail_copy_at = 7
slow_stream_us = 1000
memory_bytes = "24GiB"
)");
  auto r = load({"--config", file});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.simNvidia, 2);
  EXPECT_EQ(c.simAmd, 3);
  EXPECT_EQ(c.simCopyGbps, 12.5);
  EXPECT_EQ(c.simLatencyUs, 40u);
  EXPECT_EQ(c.simFailCopyAt, 7u);
  EXPECT_EQ(c.simSlowStreamUs, 1000u);
  EXPECT_EQ(c.simMemoryBytes, 24ull << 30);
}

TEST(SimConfigTest, OtherTomlSpellingsOfTheTableWork) {
  TempDir dir;
  std::string dotted =
      dir.write("dotted.toml", "devices.sim.nvidia = 1\ndevices.sim.copy_gbps = 3\n");
  auto r = load({"--config", dotted});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.simNvidia, 1);
  EXPECT_EQ(r->config.simCopyGbps, 3.0) << "an integer is a number too";
  std::string inlineTable = dir.write("inline.toml", "[devices]\nsim = { amd = 4 }\n");
  r = load({"--config", inlineTable});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.simAmd, 4);
}

// [devices] has keys of its own and holds [devices.sim]; both load from one file in any order.
TEST(SimConfigTest, TheParentSectionsKeysAndTheNestedSectionLoadTogether) {
  TempDir dir;
  for (const char* text : {"[devices]\nstaging_chunk_bytes = \"1MiB\"\n[devices.sim]\namd = 2\n",
                           "[devices.sim]\namd = 2\n[devices]\nstaging_chunk_bytes = \"1MiB\"\n",
                           "[devices]\nstaging_chunk_bytes = \"1MiB\"\nsim = { amd = 2 }\n"}) {
    auto r = load({"--config", dir.write("both.toml", text)});
    ASSERT_TRUE(r.isOk()) << r.status().toString() << "\n" << text;
    EXPECT_EQ(r->config.stagingChunkBytes, 1u << 20) << text;
    EXPECT_EQ(r->config.simAmd, 2) << text;
  }
}

TEST(SimConfigTest, SetFlagsSetEveryKey) {
  auto r = load({"--set", "devices.sim.nvidia=2", "--set", "devices.sim.amd=1", "--set",
                 "devices.sim.copy_gbps=0.25", "--set", "devices.sim.latency_us=5", "--set",
                 "devices.sim.fail_copy_at=3", "--set", "devices.sim.slow_stream_us=6", "--set",
                 "devices.sim.memory_bytes=2G"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.simNvidia, 2);
  EXPECT_EQ(c.simAmd, 1);
  EXPECT_EQ(c.simCopyGbps, 0.25);
  EXPECT_EQ(c.simLatencyUs, 5u);
  EXPECT_EQ(c.simFailCopyAt, 3u);
  EXPECT_EQ(c.simSlowStreamUs, 6u);
  EXPECT_EQ(c.simMemoryBytes, 2ull << 30);
}

TEST(SimConfigTest, EnvironmentSetsEveryKeyWithUnderscoresForTheDots) {
  Env env = {{"HC_DEVICES_SIM_NVIDIA", "1"},        {"HC_DEVICES_SIM_AMD", "2"},
             {"HC_DEVICES_SIM_COPY_GBPS", "1e1"},   {"HC_DEVICES_SIM_LATENCY_US", "3"},
             {"HC_DEVICES_SIM_FAIL_COPY_AT", "4"},  {"HC_DEVICES_SIM_SLOW_STREAM_US", "5"},
             {"HC_DEVICES_SIM_MEMORY_BYTES", "64M"}};
  auto r = load({}, env);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const DaemonConfig& c = r->config;
  EXPECT_EQ(c.simNvidia, 1);
  EXPECT_EQ(c.simAmd, 2);
  EXPECT_EQ(c.simCopyGbps, 10.0);
  EXPECT_EQ(c.simLatencyUs, 3u);
  EXPECT_EQ(c.simFailCopyAt, 4u);
  EXPECT_EQ(c.simSlowStreamUs, 5u);
  EXPECT_EQ(c.simMemoryBytes, 64ull << 20);
}

TEST(SimConfigTest, FlagBeatsEnvironmentBeatsFile) {
  TempDir dir;
  std::string file = dir.write("x.toml", "[devices.sim]\nnvidia = 1\namd = 1\ncopy_gbps = 1.5\n");
  auto r = load({"--config", file, "--set", "devices.sim.nvidia=3"},
                {{"HC_DEVICES_SIM_NVIDIA", "2"}, {"HC_DEVICES_SIM_AMD", "2"}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config.simNvidia, 3);
  EXPECT_EQ(r->config.simAmd, 2);
  EXPECT_EQ(r->config.simCopyGbps, 1.5);
}

TEST(SimConfigTest, UnknownNamesUnderDevicesAreErrors) {
  TempDir dir;
  auto r = load({"--config", dir.write("a.toml", "[devices.sim]\ngpus = 1\n")});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "unknown key 'devices.sim.gpus'")) << r.status().message();
  r = load({"--config", dir.write("b.toml", "[devices.gpu]\nnvidia = 1\n")});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "unknown section [devices.gpu]")) << r.status().message();
  r = load({"--config", dir.write("c.toml", "[devices]\nnvidia = 1\n")});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "unknown key 'devices.nvidia'")) << r.status().message();
  r = load({"--config", dir.write("d.toml", "devices = 3\n")});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "must be a table")) << r.status().message();
  r = load({"--set", "devices.sim.gpus=1"});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "unknown key 'devices.sim.gpus'")) << r.status().message();
  r = load({}, {{"HC_DEVICES_SIM_GPUS", "1"}});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "no key 'devices.sim.gpus' in [devices.sim]"))
      << r.status().message();
}

TEST(SimConfigTest, MalformedValuesNameTheKey) {
  TempDir dir;
  auto r = load({"--set", "devices.sim.copy_gbps=fast"});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "devices.sim.copy_gbps: expected a number, got 'fast'"))
      << r.status().message();
  r = load({"--config", dir.write("s.toml", "[devices.sim]\ncopy_gbps = \"12\"\n")});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "devices.sim.copy_gbps: expected a number"))
      << r.status().message();
  r = load({"--set", "devices.sim.nvidia=two"});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "devices.sim.nvidia")) << r.status().message();
  r = load({"--set", "devices.sim.memory_bytes=lots"});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(mentions(r.status(), "devices.sim.memory_bytes")) << r.status().message();
}

struct BadCase {
  std::vector<std::string> args;
  std::string message;
};

TEST(SimConfigTest, ValidationNamesTheKeyItsRangeAndWhereItWasSet) {
  const BadCase cases[] = {
      {{"--set", "devices.sim.nvidia=17"},
       "devices.sim.nvidia must be in [0, 16] (sim devices of that vendor on this node), got 17 "
       "(set by --set devices.sim.nvidia=17)"},
      {{"--set", "devices.sim.amd=-1"}, "devices.sim.amd must be in [0, 16]"},
      {{"--set", "devices.sim.copy_gbps=-0.5"},
       "devices.sim.copy_gbps must be a finite number >= 0 (GB/s; 0 = unlimited), got -0.5"},
      {{"--set", "devices.sim.copy_gbps=inf"}, "devices.sim.copy_gbps must be a finite number"},
      {{"--set", "devices.sim.copy_gbps=nan"}, "devices.sim.copy_gbps must be a finite number"},
      {{"--set", "devices.sim.latency_us=10000001"},
       "devices.sim.latency_us must be at most 10000000 (10 s), got 10000001"},
      {{"--set", "devices.sim.slow_stream_us=4000000000"},
       "devices.sim.slow_stream_us must be at most"},
      {{"--set", "devices.sim.memory_bytes=1000"},
       "devices.sim.memory_bytes must be at least 1048576 (1 MiB), got 1000"},
      {{"--set", "devices.sim.fail_copy_at=2"},
       "devices.sim.fail_copy_at is set but there are no sim devices"},
  };
  for (const BadCase& c : cases) {
    auto r = load(c.args);
    ASSERT_FALSE(r.isOk()) << c.args[1];
    EXPECT_EQ(r.status().code(), hc::Code::InvalidArgument);
    EXPECT_TRUE(mentions(r.status(), c.message)) << c.args[1] << ": " << r.status().message();
  }
  // The bounds themselves are fine.
  auto ok = load({"--set", "devices.sim.nvidia=16", "--set", "devices.sim.amd=0", "--set",
                  "devices.sim.latency_us=10000000", "--set", "devices.sim.memory_bytes=1M",
                  "--set", "devices.sim.fail_copy_at=1", "--set", "devices.sim.copy_gbps=0"});
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
}

TEST(SimConfigTest, PrintedConfigReloadsToAnEqualConfig) {
  TempDir dir;
  auto r = load({"--set", "devices.sim.nvidia=2", "--set", "devices.sim.amd=3", "--set",
                 "devices.sim.copy_gbps=12.345678901", "--set", "devices.sim.latency_us=7", "--set",
                 "devices.sim.fail_copy_at=5", "--set", "devices.sim.slow_stream_us=9", "--set",
                 "devices.sim.memory_bytes=5000000"});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  DaemonConfig tiny;
  tiny.simNvidia = 1;
  tiny.simCopyGbps = 1e-7;
  DaemonConfig huge;
  huge.simAmd = 1;
  huge.simCopyGbps = 1e300;
  for (const DaemonConfig& want : {DaemonConfig{}, r->config, tiny, huge}) {
    std::string text = toToml(want);
    std::string file = dir.write("printed.toml", text);
    auto again = load({"--config", file});
    ASSERT_TRUE(again.isOk()) << again.status().toString() << "\n" << text;
    EXPECT_EQ(again->config, want) << text;
  }
  std::string defaults = toToml(DaemonConfig{});
  EXPECT_NE(defaults.find("\n[devices.sim]\n"), std::string::npos) << defaults;
  EXPECT_NE(defaults.find("\ncopy_gbps = 0.0\n"), std::string::npos) << "a TOML float" << defaults;
  EXPECT_NE(defaults.find("\nmemory_bytes = 17179869184  # 16 GiB\n"), std::string::npos)
      << defaults;
  EXPECT_NE(toToml(r->config).find("\ncopy_gbps = 12.345678901\n"), std::string::npos)
      << "the shortest text that reads back exactly";
}

TEST(SimConfigTest, HelpListsTheKeysWithTheirEnvironmentNames) {
  auto r = load({"--help"});
  ASSERT_TRUE(r.isOk());
  EXPECT_NE(r->helpText.find("devices.sim.nvidia (HC_DEVICES_SIM_NVIDIA)"), std::string::npos)
      << r->helpText;
  EXPECT_NE(r->helpText.find("devices.sim.slow_stream_us (HC_DEVICES_SIM_SLOW_STREAM_US)"),
            std::string::npos);
}

}  // namespace
}  // namespace hc::config::testing
