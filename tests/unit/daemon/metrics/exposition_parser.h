// A strict parser of the Prometheus text exposition format 0.0.4, written apart from
// daemon/metrics (it shares no code with it) so the tests check the rendered text against the
// format rather than against the renderer's own idea of it.
// It accepts only what a well-formed exposition may contain and what hc_metrics should print:
// HELP and TYPE lines, samples with an optional integer timestamp; no blank lines or free
// comments. Beyond each line's shape it checks that every sample belongs to the family the last
// TYPE line announced, that no family or series appears twice, that counters are >= 0, and that
// each histogram's buckets are cumulative, strictly ordered by `le`, end at "+Inf", and that the
// "+Inf" bucket equals `_count`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hc::metrics::testing {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;  // with its suffix (_bucket, _sum, _count) for histograms
  Labels labels;     // unescaped
  double value = 0;
};

struct ParsedFamily {
  std::string name;
  std::string type;
  std::optional<std::string> help;  // unescaped
  std::vector<Sample> samples;
};

struct Exposition {
  std::vector<ParsedFamily> families;  // in the order they appear

  const ParsedFamily* family(std::string_view name) const;
  // The value of the sample named `sampleName` with exactly `labels`; nullopt when absent.
  std::optional<double> value(std::string_view sampleName, const Labels& labels = {}) const;
  // For a histogram series: `le` (as written) -> cumulative count, in the order printed.
  std::vector<std::pair<std::string, double>> buckets(std::string_view histogram,
                                                      const Labels& labels) const;
};

// Parses `text` into `out`. Returns "" when the text is well-formed, else the first problem with
// its line number ("line 3: sample 'x' before any TYPE line").
std::string parseExposition(std::string_view text, Exposition* out);

// A sample value as Prometheus reads it: decimal or exponent notation, "+Inf", "-Inf", "NaN".
std::optional<double> parsePrometheusNumber(std::string_view text);

}  // namespace hc::metrics::testing
