// DaemonMetrics: every hetero_comm_* family is announced from the start with the right type;
// each event moves the right series; collectiveFinished lands in the size class and buckets
// computed here independently (the expected bounds are written out, not taken from the code).
#include "daemon/metrics/daemon_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/daemon/metrics/exposition_parser.h"

namespace hc::metrics {
namespace {

using testing::Exposition;

constexpr std::string_view kDuration = "hetero_comm_collective_duration_seconds";

// The histogram's bounds as the README promises them: 10 us .. 100 s in 1-2.5-5 steps.
const std::vector<double> kExpectedBounds = {1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                             5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 0.5,  1,
                                             2.5,  5,      10,     25,   50,     100};

// The size classes, restated: upper bounds inclusive, in bytes.
std::string expectedSizeClass(uint64_t bytes) {
  if (bytes <= 4096) return "le_4KiB";
  if (bytes <= 65536) return "le_64KiB";
  if (bytes <= 1048576) return "le_1MiB";
  if (bytes <= 16777216) return "le_16MiB";
  return "gt_16MiB";
}

Exposition parse(const DaemonMetrics& metrics) {
  Exposition parsed;
  const std::string text = metrics.render();
  EXPECT_EQ(testing::parseExposition(text, &parsed), "") << text;
  return parsed;
}

DaemonMetrics makeMetrics() { return DaemonMetrics(BuildInfo{"1.2.3", true, false, "1.13.1"}); }

TEST(DaemonMetricsTest, EveryFamilyIsAnnouncedBeforeAnyEvent) {
  const DaemonMetrics metrics = makeMetrics();
  const Exposition parsed = parse(metrics);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"hetero_comm_build_info", "gauge"},
      {"hetero_comm_collectives_total", "counter"},
      {std::string(kDuration), "histogram"},
      {"hetero_comm_bytes_total", "counter"},
      {"hetero_comm_peer_up", "gauge"},
      {"hetero_comm_clients", "gauge"},
      {"hetero_comm_staging_fallback_total", "counter"},
      {"hetero_comm_device_reductions_total", "counter"},
      {"hetero_comm_device_direct_transfers_total", "counter"},
      {"hetero_comm_device_imports_total", "counter"},
      {"hetero_comm_device_releases_total", "counter"},
      {"hetero_comm_device_imported_bytes", "gauge"},
      {"hetero_comm_device_direct", "gauge"},
      {"hetero_comm_unexpected_messages_total", "counter"},
      {"hetero_comm_device_weight", "gauge"},
      {"hetero_comm_device_rate_gbps", "gauge"}};
  ASSERT_EQ(parsed.families.size(), expected.size());
  for (const auto& [name, type] : expected) {
    const testing::ParsedFamily* family = parsed.family(name);
    ASSERT_NE(family, nullptr) << name;
    EXPECT_EQ(family->type, type) << name;
    EXPECT_TRUE(family->help && !family->help->empty()) << name;
  }
  EXPECT_EQ(
      parsed.value("hetero_comm_build_info",
                   {{"version", "1.2.3"}, {"cuda", "true"}, {"rocm", "false"}, {"ucx", "1.13.1"}}),
      1);
  EXPECT_EQ(parsed.value("hetero_comm_clients"), 0);
  EXPECT_EQ(parsed.value("hetero_comm_device_imports_total"), 0);  // readings from the start
  EXPECT_EQ(parsed.value("hetero_comm_device_imported_bytes"), 0);
  EXPECT_TRUE(parsed.family("hetero_comm_collectives_total")->samples.empty());
  for (const char* reason : {"stale", "unknown", "over_limit"}) {  // a reading of 0 from the start
    EXPECT_EQ(parsed.value("hetero_comm_unexpected_messages_total", {{"reason", reason}}), 0)
        << reason;
  }
}

TEST(DaemonMetricsTest, DroppedMessagesAreCountedByReason) {
  DaemonMetrics metrics = makeMetrics();
  metrics.unexpectedMessagesDropped("stale", 2);
  metrics.unexpectedMessagesDropped("over_limit", 3);
  metrics.unexpectedMessagesDropped("stale", 1);
  const Exposition parsed = parse(metrics);
  EXPECT_EQ(parsed.value("hetero_comm_unexpected_messages_total", {{"reason", "stale"}}), 3);
  EXPECT_EQ(parsed.value("hetero_comm_unexpected_messages_total", {{"reason", "over_limit"}}), 3);
  EXPECT_EQ(parsed.value("hetero_comm_unexpected_messages_total", {{"reason", "unknown"}}), 0);
}

TEST(DaemonMetricsTest, CollectivesAreCountedByOpDtypeAndStatus) {
  DaemonMetrics metrics = makeMetrics();
  metrics.collectiveFinished("allreduce", "float32", "ok", 0.001, 4096);
  metrics.collectiveFinished("allreduce", "float32", "ok", 0.002, 8192);
  metrics.collectiveFinished("allreduce", "bfloat16", "timeout", 30, 8192);
  metrics.collectiveFinished("barrier", "none", "aborted", 0.5, 0);
  const Exposition parsed = parse(metrics);
  auto count = [&](const char* op, const char* dtype, const char* status) {
    return parsed.value("hetero_comm_collectives_total",
                        {{"op", op}, {"dtype", dtype}, {"status", status}});
  };
  EXPECT_EQ(count("allreduce", "float32", "ok"), 2);
  EXPECT_EQ(count("allreduce", "bfloat16", "timeout"), 1);
  EXPECT_EQ(count("barrier", "none", "aborted"), 1);
  EXPECT_FALSE(count("allreduce", "bfloat16", "ok"));
}

TEST(DaemonMetricsTest, DurationLandsInTheRightSizeClassAndBuckets) {
  struct Case {
    uint64_t bytes;
    double seconds;
  };
  const std::vector<Case> cases = {{0, 5e-6},          {4096, 1e-5},     {4097, 3e-5},
                                   {65536, 2.5e-4},    {65537, 0.0011},  {1 << 20, 0.02},
                                   {(1 << 20) + 1, 1}, {16u << 20, 7.5}, {(16u << 20) + 1, 99},
                                   {1ull << 34, 250}};
  for (const Case& c : cases) {
    DaemonMetrics metrics = makeMetrics();
    metrics.collectiveFinished("allgather", "float16", "ok", c.seconds, c.bytes);
    const Exposition parsed = parse(metrics);
    const std::string sizeClass = expectedSizeClass(c.bytes);
    SCOPED_TRACE(std::to_string(c.bytes) + " bytes in " + std::to_string(c.seconds) + " s -> " +
                 sizeClass);
    const auto buckets =
        parsed.buckets(kDuration, {{"op", "allgather"}, {"size_class", sizeClass}});
    ASSERT_EQ(buckets.size(), kExpectedBounds.size() + 1);
    for (size_t i = 0; i < kExpectedBounds.size(); ++i) {
      EXPECT_EQ(testing::parsePrometheusNumber(buckets[i].first), kExpectedBounds[i]);
      // Cumulative: the observation is in every bucket whose bound is at or above it.
      EXPECT_EQ(buckets[i].second, c.seconds <= kExpectedBounds[i] ? 1 : 0) << buckets[i].first;
    }
    EXPECT_EQ(buckets.back(), std::make_pair(std::string("+Inf"), 1.0));
    EXPECT_DOUBLE_EQ(*parsed.value(std::string(kDuration) + "_sum",
                                   {{"op", "allgather"}, {"size_class", sizeClass}}),
                     c.seconds);
    EXPECT_EQ(parsed.family(kDuration)->samples.size(), kExpectedBounds.size() + 3)
        << "one series only";
  }
}

TEST(DaemonMetricsTest, SizeClassMatchesTheRestatedBoundaries) {
  for (uint64_t bytes : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 65536ull, 65537ull, 1048576ull,
                         1048577ull, 16777216ull, 16777217ull, ~0ull}) {
    EXPECT_EQ(sizeClass(bytes), expectedSizeClass(bytes)) << bytes;
  }
}

TEST(DaemonMetricsTest, FailedOperationsStayOutOfTheDurationHistogram) {
  DaemonMetrics metrics = makeMetrics();
  metrics.collectiveFinished("reduce", "int32", "timeout", 600, 64);
  metrics.collectiveFinished("reduce", "int32", "error", 0.1, 64);
  const Exposition parsed = parse(metrics);
  EXPECT_TRUE(parsed.family(kDuration)->samples.empty());
  EXPECT_EQ(parsed.value("hetero_comm_collectives_total",
                         {{"op", "reduce"}, {"dtype", "int32"}, {"status", "timeout"}}),
            1);
}

TEST(DaemonMetricsTest, NegativeOrNaNDurationCountsAsZero) {
  DaemonMetrics metrics = makeMetrics();
  metrics.collectiveFinished("send", "uint8", "ok", -1, 1);
  metrics.collectiveFinished("send", "uint8", "ok", std::nan(""), 1);
  const Exposition parsed = parse(metrics);
  const testing::Labels series = {{"op", "send"}, {"size_class", "le_4KiB"}};
  EXPECT_EQ(parsed.value(std::string(kDuration) + "_sum", series), 0);
  EXPECT_EQ(parsed.buckets(kDuration, series).front().second, 2);
}

TEST(DaemonMetricsTest, BytesAreCountedByDirectionAndTransport) {
  DaemonMetrics metrics = makeMetrics();
  metrics.addBytes("sent", "ucx", 1000);
  metrics.addBytes("sent", "ucx", 24);
  metrics.addBytes("received", "ucx", 7);
  metrics.addBytes("sent", "shm", 1ull << 40);
  const Exposition parsed = parse(metrics);
  auto bytes = [&](const char* direction, const char* transport) {
    return parsed.value("hetero_comm_bytes_total",
                        {{"direction", direction}, {"transport", transport}});
  };
  EXPECT_EQ(bytes("sent", "ucx"), 1024);
  EXPECT_EQ(bytes("received", "ucx"), 7);
  EXPECT_EQ(bytes("sent", "shm"), 1099511627776.0);
  EXPECT_NE(metrics.render().find("transport=\"shm\"} 1099511627776\n"), std::string::npos)
      << "large integers print without an exponent";
}

TEST(DaemonMetricsTest, PeerUpClientsAndStagingFallbacks) {
  DaemonMetrics metrics = makeMetrics();
  metrics.setPeerUp("10.0.0.2:9411", true);
  metrics.setPeerUp("10.0.0.3:9411", true);
  metrics.setPeerUp("10.0.0.3:9411", false);
  metrics.setClients(3);
  metrics.stagingFallback("module_load_failed");
  metrics.stagingFallback("module_load_failed");
  metrics.stagingFallback("no_gpudirect");
  metrics.deviceReduction(false);
  metrics.deviceReduction(true);
  metrics.deviceReduction(true);
  metrics.deviceDirectTransfer();
  metrics.deviceDirectTransfer();
  metrics.deviceDirectTransfer();
  metrics.setDeviceDirect("sim:nvidia:0", true);
  metrics.setDeviceDirect("cuda:nvidia:0", false);
  metrics.deviceImported(4096);
  metrics.deviceImported(1 << 20);
  metrics.deviceReleased(4096);
  const Exposition parsed = parse(metrics);
  EXPECT_EQ(parsed.value("hetero_comm_peer_up", {{"peer", "10.0.0.2:9411"}}), 1);
  EXPECT_EQ(parsed.value("hetero_comm_peer_up", {{"peer", "10.0.0.3:9411"}}), 0);
  EXPECT_EQ(parsed.value("hetero_comm_clients"), 3);
  EXPECT_EQ(parsed.value("hetero_comm_staging_fallback_total", {{"reason", "module_load_failed"}}),
            2);
  EXPECT_EQ(parsed.value("hetero_comm_staging_fallback_total", {{"reason", "no_gpudirect"}}), 1);
  EXPECT_EQ(parsed.value("hetero_comm_device_reductions_total", {{"devices", "one"}}), 1);
  EXPECT_EQ(parsed.value("hetero_comm_device_reductions_total", {{"devices", "several"}}), 2);
  EXPECT_EQ(parsed.value("hetero_comm_device_direct_transfers_total"), 3);
  EXPECT_EQ(parsed.value("hetero_comm_device_direct", {{"device", "sim:nvidia:0"}}), 1);
  EXPECT_EQ(parsed.value("hetero_comm_device_direct", {{"device", "cuda:nvidia:0"}}), 0);
  EXPECT_EQ(parsed.value("hetero_comm_device_imports_total"), 2);
  EXPECT_EQ(parsed.value("hetero_comm_device_releases_total"), 1);
  EXPECT_EQ(parsed.value("hetero_comm_device_imported_bytes"), 1 << 20);
  metrics.setClients(0);
  EXPECT_EQ(parse(metrics).value("hetero_comm_clients"), 0);
}

}  // namespace
}  // namespace hc::metrics
