#include "tests/unit/daemon/metrics/exposition_parser.h"

#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

namespace hc::metrics::testing {
namespace {

const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");
const std::regex kDecimal(R"([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)");
const std::regex kTimestamp("-?[0-9]+");
const std::set<std::string, std::less<>> kTypes = {"counter", "gauge", "histogram", "summary",
                                                   "untyped"};

bool matches(std::string_view text, const std::regex& re) {
  return std::regex_match(text.begin(), text.end(), re);
}

// Reads `{name="value",...}` starting at text[*pos] == '{'; advances *pos past the '}'.
std::string parseLabels(std::string_view text, size_t* pos, Labels* labels) {
  size_t i = *pos + 1;
  while (true) {
    if (i >= text.size()) return "unterminated label set";
    if (text[i] == '}') break;
    if (!labels->empty()) {
      if (text[i] != ',') return "expected ',' between labels";
      ++i;
    }
    const size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) return "label without '='";
    const std::string name(text.substr(i, eq - i));
    if (!matches(name, kLabelName)) return "bad label name '" + name + "'";
    if (eq + 1 >= text.size() || text[eq + 1] != '"') return "label value must be quoted";
    std::string value;
    size_t j = eq + 2;
    for (;; ++j) {
      if (j >= text.size()) return "unterminated label value";
      const char c = text[j];
      if (c == '"') break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++j >= text.size()) return "dangling backslash";
      switch (text[j]) {
        case '\\':
          value += '\\';
          break;
        case '"':
          value += '"';
          break;
        case 'n':
          value += '\n';
          break;
        default:
          return std::string("unknown escape \\") + text[j];
      }
    }
    if (!labels->emplace(name, std::move(value)).second) return "label '" + name + "' twice";
    i = j + 1;
  }
  *pos = i + 1;
  return "";
}

std::string unescapeHelp(std::string_view text, std::string* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      *out += text[i];
      continue;
    }
    if (++i >= text.size()) return "dangling backslash in HELP";
    switch (text[i]) {
      case '\\':
        *out += '\\';
        break;
      case 'n':
        *out += '\n';
        break;
      default:
        return std::string("unknown escape \\") + text[i] + " in HELP";
    }
  }
  return "";
}

// Which family a sample named `sample` belongs to, given the current family.
bool belongsTo(const ParsedFamily& family, std::string_view sample) {
  if (family.type != "histogram" && family.type != "summary") return sample == family.name;
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (sample.size() == family.name.size() + suffix.size() && sample.starts_with(family.name) &&
        sample.ends_with(suffix)) {
      return family.type == "histogram" || suffix != "_bucket";
    }
  }
  return family.type == "summary" && sample == family.name;
}

std::string checkHistogram(const ParsedFamily& family) {
  // Series key: the labels without `le`.
  std::map<Labels, std::vector<std::pair<double, double>>> buckets;
  std::map<Labels, double> counts;
  std::set<Labels> sums;
  for (const Sample& s : family.samples) {
    Labels key = s.labels;
    if (s.name == family.name + "_bucket") {
      auto le = key.find("le");
      if (le == key.end()) return family.name + ": bucket without le";
      auto bound = parsePrometheusNumber(le->second);
      if (!bound || std::isnan(*bound)) return family.name + ": bad le '" + le->second + "'";
      key.erase(le);
      buckets[key].emplace_back(*bound, s.value);
    } else if (s.name == family.name + "_count") {
      counts[key] = s.value;
    } else {
      sums.insert(key);
    }
  }
  if (buckets.size() != counts.size() || buckets.size() != sums.size()) {
    return family.name + ": every series needs buckets, _sum and _count";
  }
  for (const auto& [key, list] : buckets) {
    for (size_t i = 1; i < list.size(); ++i) {
      if (!(list[i - 1].first < list[i].first)) return family.name + ": le not increasing";
      if (list[i - 1].second > list[i].second) return family.name + ": buckets not cumulative";
    }
    if (!std::isinf(list.back().first)) return family.name + ": last bucket is not +Inf";
    auto count = counts.find(key);
    if (count == counts.end()) return family.name + ": bucket series without _count";
    if (count->second != list.back().second) return family.name + ": +Inf bucket != _count";
    if (!sums.count(key)) return family.name + ": bucket series without _sum";
  }
  return "";
}

std::string parseLine(std::string_view line, Exposition* out, std::set<std::string>* seenFamilies,
                      std::set<std::pair<std::string, Labels>>* seenSeries) {
  if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
    const bool isHelp = line[2] == 'H';
    const std::string_view rest = line.substr(7);
    const size_t space = rest.find(' ');
    const std::string name(rest.substr(0, space));
    const std::string_view arg = space == std::string_view::npos ? "" : rest.substr(space + 1);
    if (!matches(name, kMetricName)) return "bad metric name '" + name + "'";
    if (out->families.empty() || out->families.back().name != name) {
      if (!seenFamilies->insert(name).second) return "family '" + name + "' appears twice";
      out->families.push_back(ParsedFamily{name, "", std::nullopt, {}});
    }
    ParsedFamily& family = out->families.back();
    if (!family.samples.empty()) return "HELP or TYPE after samples of '" + name + "'";
    if (isHelp) {
      if (family.help) return "second HELP for '" + name + "'";
      std::string help;
      if (auto error = unescapeHelp(arg, &help); !error.empty()) return error;
      family.help = std::move(help);
    } else {
      if (!family.type.empty()) return "second TYPE for '" + name + "'";
      if (!kTypes.count(arg)) return "unknown type '" + std::string(arg) + "'";
      family.type = std::string(arg);
    }
    return "";
  }
  if (line.empty()) return "blank line";
  if (line[0] == '#') return "comment that is neither HELP nor TYPE";

  Sample sample;
  size_t pos = 0;
  while (pos < line.size() && line[pos] != '{' && line[pos] != ' ') ++pos;
  sample.name = std::string(line.substr(0, pos));
  if (!matches(sample.name, kMetricName)) return "bad sample name '" + sample.name + "'";
  if (pos < line.size() && line[pos] == '{') {
    if (auto error = parseLabels(line, &pos, &sample.labels); !error.empty()) return error;
  }
  if (pos >= line.size() || line[pos] != ' ') return "expected ' ' before the value";
  const std::string_view tail = line.substr(pos + 1);
  const size_t space = tail.find(' ');
  auto value = parsePrometheusNumber(tail.substr(0, space));
  if (!value) return "bad value '" + std::string(tail.substr(0, space)) + "'";
  if (space != std::string_view::npos && !matches(tail.substr(space + 1), kTimestamp)) {
    return "bad timestamp";
  }
  sample.value = *value;

  if (out->families.empty() || out->families.back().type.empty()) {
    return "sample '" + sample.name + "' before any TYPE line";
  }
  ParsedFamily& family = out->families.back();
  if (!belongsTo(family, sample.name)) {
    return "sample '" + sample.name + "' outside its family (current: '" + family.name + "')";
  }
  if (family.type == "counter" && !(sample.value >= 0)) return "negative or NaN counter";
  if (!seenSeries->emplace(sample.name, sample.labels).second) {
    return "series '" + sample.name + "' twice with the same labels";
  }
  family.samples.push_back(std::move(sample));
  return "";
}

}  // namespace

std::optional<double> parsePrometheusNumber(std::string_view text) {
  if (text == "+Inf") return HUGE_VAL;
  if (text == "-Inf") return -HUGE_VAL;
  if (text == "NaN") return std::nan("");
  if (!matches(text, kDecimal)) return std::nullopt;
  return std::strtod(std::string(text).c_str(), nullptr);
}

std::string parseExposition(std::string_view text, Exposition* out) {
  *out = Exposition{};
  if (!text.empty() && text.back() != '\n') return "text does not end with a newline";
  std::set<std::string> seenFamilies;
  std::set<std::pair<std::string, Labels>> seenSeries;
  size_t lineNo = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    ++lineNo;
    const std::string error =
        parseLine(text.substr(start, end - start), out, &seenFamilies, &seenSeries);
    if (!error.empty()) return "line " + std::to_string(lineNo) + ": " + error;
    start = end + 1;
  }
  for (const ParsedFamily& family : out->families) {
    if (family.type.empty()) return "family '" + family.name + "' has no TYPE";
    if (family.type == "histogram") {
      if (auto error = checkHistogram(family); !error.empty()) return error;
    }
  }
  return "";
}

const ParsedFamily* Exposition::family(std::string_view name) const {
  for (const ParsedFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> Exposition::value(std::string_view sampleName, const Labels& labels) const {
  for (const ParsedFamily& f : families) {
    for (const Sample& s : f.samples) {
      if (s.name == sampleName && s.labels == labels) return s.value;
    }
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, double>> Exposition::buckets(std::string_view histogram,
                                                                const Labels& labels) const {
  std::vector<std::pair<std::string, double>> out;
  const ParsedFamily* f = family(histogram);
  if (f == nullptr) return out;
  for (const Sample& s : f->samples) {
    if (s.name != f->name + "_bucket") continue;
    Labels key = s.labels;
    const auto le = key.find("le");
    if (le == key.end()) continue;
    const std::string bound = le->second;
    key.erase("le");
    if (key == labels) out.emplace_back(bound, s.value);
  }
  return out;
}

}  // namespace hc::metrics::testing
