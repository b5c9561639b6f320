// Registry: counters, gauges and histograms read back through the independent parser; escaping
// round trips; number spelling; stable series order; registration rules; concurrent use.
#include "daemon/metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "daemon/metrics/exposition.h"
#include "tests/unit/daemon/metrics/exposition_parser.h"

namespace hc::metrics {
namespace {

using testing::Exposition;

Exposition parse(const Registry& registry) {
  Exposition parsed;
  const std::string text = registry.render();
  const std::string error = testing::parseExposition(text, &parsed);
  EXPECT_EQ(error, "") << text;
  return parsed;
}

TEST(RegistryTest, FamiliesWithoutSamplesStillPrintHelpAndType) {
  Registry registry;
  registry.counter("a_total", "A things.", {"x"});
  registry.gauge("b", "B now.");
  registry.histogram("c_seconds", "C time.", {}, {1, 2});
  EXPECT_EQ(registry.render(),
            "# HELP a_total A things.\n# TYPE a_total counter\n"
            "# HELP b B now.\n# TYPE b gauge\n"
            "# HELP c_seconds C time.\n# TYPE c_seconds histogram\n");
}

TEST(RegistryTest, CounterMovesByTheAmountsAdded) {
  Registry registry;
  CounterFamily& counter = registry.counter("ops_total", "Ops.", {"op"});
  counter.add({"x"}, 1);
  counter.add({"x"}, 2.5);
  counter.add({"x"}, 0);
  EXPECT_EQ(parse(registry).value("ops_total", {{"op", "x"}}), 3.5);
  counter.add({"x"}, 1e6);
  EXPECT_EQ(parse(registry).value("ops_total", {{"op", "x"}}), 1000003.5);
}

TEST(RegistryTest, CounterDropsNegativeAndNaNAmounts) {
  Registry registry;
  CounterFamily& counter = registry.counter("ops_total", "Ops.");
  counter.add({}, 5);
  counter.add({}, -1);
  counter.add({}, std::nan(""));
  EXPECT_EQ(parse(registry).value("ops_total"), 5);
}

TEST(RegistryTest, LabelsSeparateSeries) {
  Registry registry;
  CounterFamily& counter = registry.counter("ops_total", "Ops.", {"op", "status"});
  counter.add({"allreduce", "ok"}, 1);
  counter.add({"allreduce", "error"}, 2);
  counter.add({"broadcast", "ok"}, 4);
  const Exposition parsed = parse(registry);
  EXPECT_EQ(parsed.family("ops_total")->samples.size(), 3u);
  EXPECT_EQ(parsed.value("ops_total", {{"op", "allreduce"}, {"status", "ok"}}), 1);
  EXPECT_EQ(parsed.value("ops_total", {{"op", "allreduce"}, {"status", "error"}}), 2);
  EXPECT_EQ(parsed.value("ops_total", {{"op", "broadcast"}, {"status", "ok"}}), 4);
  EXPECT_FALSE(parsed.value("ops_total", {{"op", "broadcast"}, {"status", "error"}}));
}

TEST(RegistryTest, GaugeSetAndAdd) {
  Registry registry;
  GaugeFamily& gauge = registry.gauge("level", "Level.", {"k"});
  gauge.set({"a"}, 7);
  gauge.add({"a"}, -2.5);
  gauge.add({"b"}, 3);
  gauge.set({"c"}, -4);
  const Exposition parsed = parse(registry);
  EXPECT_EQ(parsed.value("level", {{"k", "a"}}), 4.5);
  EXPECT_EQ(parsed.value("level", {{"k", "b"}}), 3);
  EXPECT_EQ(parsed.value("level", {{"k", "c"}}), -4);
}

TEST(RegistryTest, HistogramBucketsAreCumulativeAndEndAtInf) {
  Registry registry;
  HistogramFamily& histogram = registry.histogram("lat_seconds", "Latency.", {"op"}, {0.5, 1, 2});
  // A value equal to a bound belongs to that bucket (le is "less than or equal").
  for (double v : {0.1, 0.5, 0.7, 1.0, 1.5, 3.0, 100.0}) histogram.observe({"x"}, v);
  const Exposition parsed = parse(registry);
  const auto buckets = parsed.buckets("lat_seconds", {{"op", "x"}});
  const std::vector<std::pair<std::string, double>> expected = {
      {"0.5", 2}, {"1", 4}, {"2", 5}, {"+Inf", 7}};
  EXPECT_EQ(buckets, expected);
  EXPECT_EQ(parsed.value("lat_seconds_count", {{"op", "x"}}), 7);
  EXPECT_DOUBLE_EQ(*parsed.value("lat_seconds_sum", {{"op", "x"}}), 106.8);
}

TEST(RegistryTest, HistogramAcceptsATrailingInfBound) {
  Registry registry;
  HistogramFamily& histogram = registry.histogram("h", "H.", {}, {1, HUGE_VAL});
  histogram.observe({}, 5);
  const auto buckets = parse(registry).buckets("h", {});
  ASSERT_EQ(buckets.size(), 2u) << "+Inf printed once";
  EXPECT_EQ(buckets[1], std::make_pair(std::string("+Inf"), 1.0));
}

TEST(RegistryTest, LabelValuesRoundTripThroughEscaping) {
  Registry registry;
  GaugeFamily& gauge = registry.gauge("g", "G.", {"path"});
  const std::vector<std::string> awkward = {
      "quote\"inside", "back\\slash", "new\nline", "all \\\"\n\\n of them", "", "utf-8 \xc3\xa9"};
  for (size_t i = 0; i < awkward.size(); ++i) gauge.set({awkward[i]}, static_cast<double>(i));
  const Exposition parsed = parse(registry);
  for (size_t i = 0; i < awkward.size(); ++i) {
    EXPECT_EQ(parsed.value("g", {{"path", awkward[i]}}), static_cast<double>(i)) << awkward[i];
  }
}

TEST(RegistryTest, HelpTextRoundTripsThroughEscaping) {
  Registry registry;
  const std::string help = "Line one\nline \"two\" with a \\ backslash.";
  registry.gauge("g", help);
  const Exposition parsed = parse(registry);
  EXPECT_EQ(parsed.family("g")->help, help);
}

TEST(RegistryTest, NumbersAreSpelledSoPrometheusParsesThem) {
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(-0.0), "0");
  EXPECT_EQ(formatValue(1), "1");
  EXPECT_EQ(formatValue(-7), "-7");
  EXPECT_EQ(formatValue(1048576), "1048576");
  EXPECT_EQ(formatValue(1e15), "1000000000000000");
  EXPECT_EQ(formatValue(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(formatValue(0.25), "0.25");
  EXPECT_EQ(formatValue(123456.789), "123456.789");
  // Exponents as Go's strconv 'g' writes them, so `le` labels match other exporters'.
  EXPECT_EQ(formatValue(0.0001), "0.0001");
  EXPECT_EQ(formatValue(0.00025), "0.00025");
  EXPECT_EQ(formatValue(2.5e-05), "2.5e-05");
  EXPECT_EQ(formatValue(-1e-05), "-1e-05");
  EXPECT_EQ(formatValue(1e300), "1e+300");
  EXPECT_EQ(formatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(formatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(formatValue(std::nan("")), "NaN");
  // Everything else: whatever the spelling, it parses back to the very same double.
  for (double v : {1e-05, 2.5e-05, 0.1, 1.0 / 3, -123.456, 1e300, 5e-324, 1.8446744073709552e19,
                   9007199254740993.0 * 4}) {
    const std::string text = formatValue(v);
    const auto back = testing::parsePrometheusNumber(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, v) << text;
  }
}

TEST(RegistryTest, SeriesComeInAStableOrder) {
  Registry registry;
  CounterFamily& counter = registry.counter("c_total", "C.", {"k"});
  for (const char* k : {"m", "b", "z", "a"}) counter.add({k}, 1);
  const std::string first = registry.render();
  EXPECT_LT(first.find("k=\"a\""), first.find("k=\"b\""));
  EXPECT_LT(first.find("k=\"b\""), first.find("k=\"m\""));
  EXPECT_LT(first.find("k=\"m\""), first.find("k=\"z\""));
  EXPECT_EQ(registry.render(), first);
}

TEST(RegistryTest, AskingAgainReturnsTheSameFamily) {
  Registry registry;
  CounterFamily& a = registry.counter("c_total", "C.", {"k"});
  CounterFamily& b = registry.counter("c_total", "C.", {"k"});
  EXPECT_EQ(&a, &b);
  HistogramFamily& h1 = registry.histogram("h", "H.", {}, {1, 2});
  HistogramFamily& h2 = registry.histogram("h", "H.", {}, {1, 2, HUGE_VAL});
  EXPECT_EQ(&h1, &h2);
  EXPECT_EQ(parse(registry).families.size(), 2u);
}

TEST(RegistryDeathTest, ConflictingOrIllegalRegistrationsAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Registry registry;
  registry.counter("c_total", "C.", {"k"});
  EXPECT_DEATH(registry.gauge("c_total", "C.", {"k"}), "");
  EXPECT_DEATH(registry.counter("c_total", "C.", {"other"}), "");
  EXPECT_DEATH(registry.counter("bad-name", "C."), "");
  EXPECT_DEATH(registry.counter("x_total", "X.", {"__reserved"}), "");
  EXPECT_DEATH(registry.histogram("h", "H.", {"le"}, {1}), "");
  EXPECT_DEATH(registry.histogram("h2", "H.", {}, {2, 1}), "");
  EXPECT_DEATH(registry.counter("c_total", "C.", {"k"}).add({"a", "b"}, 1), "");
}

TEST(RegistryTest, ConcurrentUpdatesAndRendersLoseNothing) {
  Registry registry;
  CounterFamily& counter = registry.counter("c_total", "C.", {"t"});
  HistogramFamily& histogram = registry.histogram("h_seconds", "H.", {"t"}, {0.5});
  constexpr int kAdds = 20000;
  std::vector<std::thread> writers;
  for (const char* t : {"a", "b"}) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        counter.add({t}, 1);
        histogram.observe({t}, (i % 2) ? 1.0 : 0.1);
      }
    });
  }
  // Renders race the writers; each must still be a well-formed exposition.
  for (int i = 0; i < 20; ++i) parse(registry);
  for (auto& w : writers) w.join();
  const Exposition parsed = parse(registry);
  for (const char* t : {"a", "b"}) {
    EXPECT_EQ(parsed.value("c_total", {{"t", t}}), kAdds);
    EXPECT_EQ(parsed.value("h_seconds_count", {{"t", t}}), kAdds);
    EXPECT_EQ(parsed.value("h_seconds_bucket", {{"t", t}, {"le", "0.5"}}), kAdds / 2);
  }
}

}  // namespace
}  // namespace hc::metrics
