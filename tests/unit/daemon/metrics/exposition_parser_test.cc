// The test parser itself: it must accept a well-formed exposition and reject each kind of
// mistake, or the tests that lean on it would prove nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/daemon/metrics/exposition_parser.h"

namespace hc::metrics::testing {
namespace {

constexpr std::string_view kGood =
    "# HELP req_total Requests, \\\\ and\\nmore.\n"
    "# TYPE req_total counter\n"
    "req_total{code=\"200\",path=\"a\\\"b\\\\c\\nd\"} 3\n"
    "req_total{code=\"500\",path=\"/\"} 0 1700000000000\n"
    "# TYPE temp gauge\n"
    "temp -1.5e-3\n"
    "# HELP lat_seconds Latency.\n"
    "# TYPE lat_seconds histogram\n"
    "lat_seconds_bucket{op=\"x\",le=\"0.1\"} 1\n"
    "lat_seconds_bucket{op=\"x\",le=\"1\"} 2\n"
    "lat_seconds_bucket{op=\"x\",le=\"+Inf\"} 3\n"
    "lat_seconds_sum{op=\"x\"} 7.25\n"
    "lat_seconds_count{op=\"x\"} 3\n";

std::string errorOf(std::string_view text) {
  Exposition parsed;
  return parseExposition(text, &parsed);
}

TEST(ExpositionParserTest, AcceptsWellFormedTextAndUnescapes) {
  Exposition parsed;
  ASSERT_EQ(parseExposition(kGood, &parsed), "");
  ASSERT_EQ(parsed.families.size(), 3u);
  EXPECT_EQ(parsed.families[0].help, "Requests, \\ and\nmore.");
  EXPECT_EQ(parsed.value("req_total", {{"code", "200"}, {"path", "a\"b\\c\nd"}}), 3);
  EXPECT_EQ(parsed.value("temp"), -0.0015);
  EXPECT_EQ(parsed.value("lat_seconds_count", {{"op", "x"}}), 3);
  const auto buckets = parsed.buckets("lat_seconds", {{"op", "x"}});
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[2].first, "+Inf");
  EXPECT_EQ(parseExposition("", &parsed), "");
}

TEST(ExpositionParserTest, RejectsMalformedLines) {
  EXPECT_NE(errorOf("# TYPE a counter\na 1"), "") << "no final newline";
  EXPECT_NE(errorOf("a 1\n"), "") << "sample before TYPE";
  EXPECT_NE(errorOf("# TYPE a counter\nb 1\n"), "") << "sample outside its family";
  EXPECT_NE(errorOf("# TYPE a counter\n\na 1\n"), "") << "blank line";
  EXPECT_NE(errorOf("# TYPE a counter\n# just a comment\n"), "") << "free comment";
  EXPECT_NE(errorOf("# TYPE a countr\n"), "") << "unknown type";
  EXPECT_NE(errorOf("# TYPE 1a counter\n"), "") << "bad name";
  EXPECT_NE(errorOf("# TYPE a gauge\na{b=\"x\\t\"} 1\n"), "") << "unknown escape";
  EXPECT_NE(errorOf("# TYPE a gauge\na{b=\"x} 1\n"), "") << "unterminated value";
  EXPECT_NE(errorOf("# TYPE a gauge\na{b=x} 1\n"), "") << "unquoted value";
  EXPECT_NE(errorOf("# TYPE a gauge\na{b=\"1\",b=\"2\"} 1\n"), "") << "label twice";
  EXPECT_NE(errorOf("# TYPE a gauge\na inf\n"), "") << "Go spelling only: +Inf";
  EXPECT_NE(errorOf("# TYPE a gauge\na 0x10\n"), "") << "hex value";
  EXPECT_NE(errorOf("# TYPE a gauge\na 1\na 2\n"), "") << "same series twice";
  EXPECT_NE(errorOf("# TYPE a counter\na -1\n"), "") << "negative counter";
  EXPECT_NE(errorOf("# TYPE a gauge\n# TYPE b gauge\n# TYPE a gauge\n"), "") << "split family";
  EXPECT_NE(errorOf("# TYPE a gauge\na 1\n# HELP a late\n"), "") << "HELP after samples";
}

TEST(ExpositionParserTest, RejectsBrokenHistograms) {
  const std::string head = "# TYPE h histogram\n";
  const std::string tail = "h_sum 1\nh_count 2\n";
  EXPECT_EQ(errorOf(head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n" + tail), "");
  EXPECT_NE(errorOf(head + "h_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n" + tail), "")
      << "not cumulative";
  EXPECT_NE(errorOf(head +
                    "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
                    "h_bucket{le=\"+Inf\"} 2\n" +
                    tail),
            "")
      << "le out of order";
  EXPECT_NE(errorOf(head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"5\"} 2\n" + tail), "") << "no +Inf";
  EXPECT_NE(errorOf(head + "h_bucket{le=\"+Inf\"} 3\n" + tail), "") << "+Inf != _count";
  EXPECT_NE(errorOf(head + "h_bucket{le=\"+Inf\"} 2\nh_count 2\n"), "") << "no _sum";
  EXPECT_NE(errorOf(head + "h_bucket 2\n" + tail), "") << "bucket without le";
  EXPECT_NE(errorOf(head + "h 2\n"), "") << "bare histogram sample";
}

TEST(ExpositionParserTest, ReadsNumbersTheWayPrometheusDoes) {
  EXPECT_EQ(parsePrometheusNumber("42"), 42);
  EXPECT_EQ(parsePrometheusNumber("-0.25"), -0.25);
  EXPECT_EQ(parsePrometheusNumber("2.5e-05"), 2.5e-05);
  EXPECT_EQ(parsePrometheusNumber("+Inf"), HUGE_VAL);
  EXPECT_EQ(parsePrometheusNumber("-Inf"), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(*parsePrometheusNumber("NaN")));
  EXPECT_FALSE(parsePrometheusNumber(""));
  EXPECT_FALSE(parsePrometheusNumber("1e"));
  EXPECT_FALSE(parsePrometheusNumber("nan"));
  EXPECT_FALSE(parsePrometheusNumber("1 2"));
}

}  // namespace
}  // namespace hc::metrics::testing
