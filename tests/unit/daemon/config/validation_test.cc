#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "tests/unit/daemon/config/config_test_util.h"

namespace hc::config {
namespace {

using testing::Env;
using testing::load;
using testing::TempDir;

// One bad input. `file` (when not empty) is written to a temp dir and passed as --config; every
// string in `mentions` must appear in the error, and "@FILE" stands for that file's path.
struct BadInput {
  const char* name;
  std::string file;
  std::vector<std::string> args;
  Env env;
  std::vector<std::string> mentions;
};

void PrintTo(const BadInput& c, std::ostream* os) { *os << c.name; }

class LoadConfigErrorTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(LoadConfigErrorTest, IsInvalidArgumentNamingTheKey) {
  const BadInput& c = GetParam();
  TempDir dir;
  std::vector<std::string> args = c.args;
  std::string file = dir.path() + "/none.toml";
  if (!c.file.empty()) {
    file = dir.write("hetero-commd.toml", c.file);
    args.insert(args.begin(), {"--config", file});
  }
  auto r = load(args, c.env);
  ASSERT_FALSE(r.isOk()) << c.name << " loaded";
  EXPECT_EQ(r.status().code(), hc::Code::InvalidArgument);
  for (std::string want : c.mentions) {
    if (size_t at = want.find("@FILE"); at != std::string::npos) want.replace(at, 5, file);
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << "'" << r.status().message() << "' does not mention '" << want << "'";
  }
}

const char* kRing100 = "[session]\nring_entries = 100\n";

INSTANTIATE_TEST_SUITE_P(
    Files, LoadConfigErrorTest,
    ::testing::Values(
        BadInput{"RingNotPowerOfTwo", kRing100, {}, {}, {"session.ring_entries", "100", "@FILE"}},
        BadInput{"RingTooSmall", "[session]\nring_entries = 8\n", {}, {}, {"session.ring_entries"}},
        BadInput{
            "RingTooLarge", "[session]\nring_entries = 8192\n", {}, {}, {"session.ring_entries"}},
        BadInput{"SpinTooLong", "[exec]\nspin_us = 10001\n", {}, {}, {"exec.spin_us"}},
        BadInput{
            "InitTimeoutZero", "[comm]\ninit_timeout_ms = 0\n", {}, {}, {"comm.init_timeout_ms"}},
        BadInput{
            "OpTimeoutNegative", "[comm]\nop_timeout_ms = -1\n", {}, {}, {"comm.op_timeout_ms"}},
        BadInput{"UnknownLevel",
                 "[server]\nlog_level = \"verbose\"\n",
                 {},
                 {},
                 {"server.log_level", "verbose"}},
        BadInput{"SegmentAboveMax",
                 "[session]\nsegment_bytes = \"2G\"\nmax_segment_bytes = \"1G\"\n",
                 {},
                 {},
                 {"session.segment_bytes", "session.max_segment_bytes"}},
        BadInput{"SegmentTooSmall",
                 "[session]\nsegment_bytes = 100\n",
                 {},
                 {},
                 {"session.segment_bytes"}},
        BadInput{"NoClients", "[session]\nmax_clients = 0\n", {}, {}, {"session.max_clients"}},
        BadInput{"NoClientsPerUid", "[session]\nmax_clients_per_uid = 0\n", {}, {},
                 {"session.max_clients_per_uid"}},
        BadInput{"UidSegmentsBelowOneSegment",
                 "[session]\nmax_segment_bytes_per_uid = \"512MiB\"\n", {}, {},
                 {"session.max_segment_bytes_per_uid"}},
        BadInput{"HelloTimeoutTooShort", "[session]\nhello_timeout_ms = 5\n", {}, {},
                 {"session.hello_timeout_ms"}},
        BadInput{"RanksBeyondTheWire", "[session]\nmax_ranks = 2000000\n", {}, {},
                 {"session.max_ranks"}},
        BadInput{"TinyStaging", "[session]\nmax_staging_bytes = \"4KiB\"\n", {}, {},
                 {"session.max_staging_bytes"}},
        BadInput{
            "EmptyGroupName", "[access]\nallow_groups = [\"\"]\n", {}, {}, {"access.allow_groups"}},
        BadInput{"SocketPathTooLong",
                 "[server]\nsocket = \"/" + std::string(120, 's') + "\"\n",
                 {},
                 {},
                 {"server.socket"}},
        BadInput{"UnknownKey", "[exec]\nspin = 1\n", {}, {}, {"exec.spin", "@FILE"}},
        BadInput{"UnknownSection", "[execs]\nspin_us = 1\n", {}, {}, {"execs", "@FILE"}},
        BadInput{"SectionNotATable", "exec = 1\n", {}, {}, {"exec", "@FILE"}},
        BadInput{"StringForInteger",
                 "[exec]\nspin_us = \"fast\"\n",
                 {},
                 {},
                 {"exec.spin_us", "integer", "@FILE"}},
        BadInput{
            "FloatForSize", "[session]\nsegment_bytes = 1.5\n", {}, {}, {"session.segment_bytes"}},
        BadInput{"BadSizeSuffix",
                 "[session]\nsegment_bytes = \"1 lots\"\n",
                 {},
                 {},
                 {"session.segment_bytes", "1 lots"}},
        BadInput{"NegativeUnsigned",
                 "[session]\nring_entries = -16\n",
                 {},
                 {},
                 {"session.ring_entries"}},
        BadInput{"TooBigForU32",
                 "[session]\nmax_clients = 4294967296\n",
                 {},
                 {},
                 {"session.max_clients"}},
        BadInput{
            "TooBigForI32", "[comm]\nop_timeout_ms = 2147483648\n", {}, {}, {"comm.op_timeout_ms"}},
        BadInput{
            "StringForList", "[access]\nallow_groups = \"a,b\"\n", {}, {}, {"access.allow_groups"}},
        BadInput{"MixedList", "[access]\nallow_uids = [1, \"2\"]\n", {}, {}, {"access.allow_uids"}},
        BadInput{"IntegerForString", "[server]\nsocket = 5\n", {}, {}, {"server.socket"}},
        BadInput{"SyntaxError", "[exec\nspin_us = 1\n", {}, {}, {"@FILE:1:"}}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    EnvAndFlags, LoadConfigErrorTest,
    ::testing::Values(
        BadInput{"MissingConfigFlagFile",
                 "",
                 {"--config", "/nonexistent/x.toml"},
                 {},
                 {"/nonexistent/x.toml"}},
        BadInput{"MissingHcConfigFile",
                 "",
                 {},
                 {{"HC_CONFIG", "/nonexistent/y.toml"}},
                 {"/nonexistent/y.toml"}},
        BadInput{"UnknownVariable", "", {}, {{"HC_EXEC_SPIN", "1"}}, {"HC_EXEC_SPIN", "exec.spin"}},
        BadInput{"BadVariableValue",
                 "",
                 {},
                 {{"HC_EXEC_SPIN_US", "abc"}},
                 {"HC_EXEC_SPIN_US", "exec.spin_us", "abc"}},
        BadInput{"RangeErrorNamesTheVariable",
                 "",
                 {},
                 {{"HC_EXEC_SPIN_US", "20000"}},
                 {"exec.spin_us", "HC_EXEC_SPIN_US"}},
        BadInput{"BadFlagValue",
                 "",
                 {"--ring-entries", "lots"},
                 {},
                 {"--ring-entries", "session.ring_entries"}},
        BadInput{"RangeErrorNamesTheFlag",
                 "",
                 {"--ring-entries", "48"},
                 {},
                 {"session.ring_entries", "--ring-entries"}},
        BadInput{"SetUnknownKey", "", {"--set", "exec.spinning=1"}, {}, {"exec.spinning"}},
        BadInput{"SetWithoutValue", "", {"--set", "exec.spin_us"}, {}, {"exec.spin_us"}},
        BadInput{"SetBadValue",
                 "",
                 {"--set", "comm.init_timeout_ms=soon"},
                 {},
                 {"comm.init_timeout_ms", "soon"}},
        BadInput{"UnknownFlag", "", {"--bogus"}, {}, {"--bogus"}},
        BadInput{"StrayArgument", "", {"--set", "exec.spin_us=1", "extra"}, {}, {"extra"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoadConfigTest, BrokenDropInIsNamed) {
  TempDir dir;
  std::string main = dir.write("hetero-commd.toml", "");
  std::string bad = dir.write("conf.d/50-bad.toml", "[exec]\nspin_us = true\n");
  auto r = load({"--config", main});
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), hc::Code::InvalidArgument);
  EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("exec.spin_us"), std::string::npos) << r.status().message();
}

TEST(ValidateTest, EveryRangeNamesItsKey) {
  struct Case {
    void (*mutate)(DaemonConfig*);
    const char* key;
  };
  const Case kCases[] = {
      {[](DaemonConfig* c) { c->ringEntries = 100; }, "session.ring_entries"},
      {[](DaemonConfig* c) { c->ringEntries = 0; }, "session.ring_entries"},
      {[](DaemonConfig* c) { c->spinUs = 10001; }, "exec.spin_us"},
      {[](DaemonConfig* c) { c->initTimeoutMs = -5; }, "comm.init_timeout_ms"},
      {[](DaemonConfig* c) { c->opTimeoutMs = -1; }, "comm.op_timeout_ms"},
      {[](DaemonConfig* c) { c->logLevel = "INFO"; }, "server.log_level"},
      {[](DaemonConfig* c) { c->socketPath.clear(); }, "server.socket"},
      {[](DaemonConfig* c) { c->maxClients = 0; }, "session.max_clients"},
      {[](DaemonConfig* c) { c->reductionThreads = 1000; }, "exec.reduction_threads"},
      {[](DaemonConfig* c) { c->maxSegmentBytes = 1 << 20; }, "session.max_segment_bytes"},
  };
  for (const Case& c : kCases) {
    DaemonConfig config;
    c.mutate(&config);
    hc::Status s = validate(config);
    EXPECT_EQ(s.code(), hc::Code::InvalidArgument) << c.key;
    EXPECT_NE(s.message().find(c.key), std::string::npos) << s.message();
  }
  DaemonConfig edges;
  edges.ringEntries = 16;
  edges.spinUs = 10000;
  edges.opTimeoutMs = 0;
  edges.reductionThreads = 0;
  edges.segmentBytes = edges.maxSegmentBytes;
  EXPECT_TRUE(validate(edges).isOk()) << validate(edges).toString();
}

}  // namespace
}  // namespace hc::config
