#include "daemon/metrics/registry.h"

#include <algorithm>
#include <cmath>

#include "common/status.h"
#include "daemon/metrics/exposition.h"

namespace hc::metrics {

Family::Family(std::string name, std::string help, std::vector<std::string> labelNames)
    : name_(std::move(name)), help_(std::move(help)), labelNames_(std::move(labelNames)) {}

void Family::appendSeriesName(std::string& out, std::string_view suffix, const LabelValues& values,
                              std::string_view extraName, std::string_view extraValue) const {
  out += name_;
  out += suffix;
  if (labelNames_.empty() && extraName.empty()) return;
  out += '{';
  bool first = true;
  auto label = [&](std::string_view labelName, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out += labelName;
    out += "=\"";
    appendEscapedLabelValue(out, value);
    out += '"';
  };
  for (size_t i = 0; i < labelNames_.size(); ++i) label(labelNames_[i], values[i]);
  if (!extraName.empty()) label(extraName, extraValue);
  out += '}';
}

void Family::checkArity(const LabelValues& values) const {
  HC_CHECK(values.size() == labelNames_.size());
}

void ScalarFamily::renderSamples(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [values, value] : values_) {
    appendSeriesName(out, "", values);
    out += ' ';
    out += formatValue(value);
    out += '\n';
  }
}

void CounterFamily::add(const LabelValues& values, double amount) {
  checkArity(values);
  if (!(amount >= 0)) return;  // also false for NaN
  std::lock_guard lock(mu_);
  values_[values] += amount;
}

void GaugeFamily::set(const LabelValues& values, double value) {
  checkArity(values);
  std::lock_guard lock(mu_);
  values_[values] = value;
}

void GaugeFamily::add(const LabelValues& values, double delta) {
  checkArity(values);
  std::lock_guard lock(mu_);
  values_[values] += delta;
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> labelNames, std::vector<double> bounds)
    : Family(std::move(name), std::move(help), std::move(labelNames)), bounds_(std::move(bounds)) {
  if (!bounds_.empty() && std::isinf(bounds_.back()) && bounds_.back() > 0) bounds_.pop_back();
  for (size_t i = 0; i < bounds_.size(); ++i) {
    HC_CHECK(std::isfinite(bounds_[i]));
    HC_CHECK(i == 0 || bounds_[i - 1] < bounds_[i]);
  }
}

void HistogramFamily::observe(const LabelValues& values, double value) {
  checkArity(values);
  // lower_bound: the first bound >= value, i.e. the first bucket whose `le` holds the value.
  // NaN compares false with everything, so it is sent to +Inf explicitly.
  const size_t bucket =
      std::isnan(value)
          ? bounds_.size()
          : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                bounds_.begin());
  std::lock_guard lock(mu_);
  Series& series = series_[values];
  if (series.bucketCounts.empty()) series.bucketCounts.assign(bounds_.size() + 1, 0);
  ++series.bucketCounts[bucket];
  series.sum += value;
  ++series.count;
}

void HistogramFamily::renderSamples(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [values, series] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += series.bucketCounts[i];
      const std::string le = i < bounds_.size() ? formatValue(bounds_[i]) : "+Inf";
      appendSeriesName(out, "_bucket", values, "le", le);
      out += ' ';
      out += formatValue(static_cast<double>(cumulative));
      out += '\n';
    }
    appendSeriesName(out, "_sum", values);
    out += ' ';
    out += formatValue(series.sum);
    out += '\n';
    appendSeriesName(out, "_count", values);
    out += ' ';
    out += formatValue(static_cast<double>(series.count));
    out += '\n';
  }
}

void Registry::checkNames(const std::string& name,
                          const std::vector<std::string>& labelNames) const {
  HC_CHECK(isValidMetricName(name));
  for (size_t i = 0; i < labelNames.size(); ++i) {
    HC_CHECK(isValidLabelName(labelNames[i]));
    for (size_t j = 0; j < i; ++j) HC_CHECK(labelNames[j] != labelNames[i]);
  }
}

Family* Registry::find(std::string_view name, std::string_view typeName,
                       const std::vector<std::string>& labelNames) const {
  for (const auto& family : families_) {
    if (family->name() != name) continue;
    HC_CHECK(family->typeName() == typeName);
    HC_CHECK(family->labelNames() == labelNames);
    return family.get();
  }
  return nullptr;
}

CounterFamily& Registry::counter(std::string name, std::string help,
                                 std::vector<std::string> labelNames) {
  checkNames(name, labelNames);
  std::lock_guard lock(mu_);
  if (Family* found = find(name, "counter", labelNames)) return static_cast<CounterFamily&>(*found);
  auto family =
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(labelNames));
  CounterFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

GaugeFamily& Registry::gauge(std::string name, std::string help,
                             std::vector<std::string> labelNames) {
  checkNames(name, labelNames);
  std::lock_guard lock(mu_);
  if (Family* found = find(name, "gauge", labelNames)) return static_cast<GaugeFamily&>(*found);
  auto family =
      std::make_unique<GaugeFamily>(std::move(name), std::move(help), std::move(labelNames));
  GaugeFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

HistogramFamily& Registry::histogram(std::string name, std::string help,
                                     std::vector<std::string> labelNames,
                                     std::vector<double> bounds) {
  checkNames(name, labelNames);
  // `le` is the bucket label the format adds itself.
  HC_CHECK(std::find(labelNames.begin(), labelNames.end(), "le") == labelNames.end());
  std::lock_guard lock(mu_);
  if (Family* found = find(name, "histogram", labelNames)) {
    auto& existing = static_cast<HistogramFamily&>(*found);
    HistogramFamily probe("probe", "", {}, std::move(bounds));  // same normalization and checks
    HC_CHECK(existing.bounds() == probe.bounds());
    return existing;
  }
  auto family = std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                  std::move(labelNames), std::move(bounds));
  HistogramFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

std::string Registry::render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& family : families_) {
    out += "# HELP ";
    out += family->name();
    out += ' ';
    appendEscapedHelp(out, family->help());
    out += "\n# TYPE ";
    out += family->name();
    out += ' ';
    out += family->typeName();
    out += '\n';
    family->renderSamples(out);
  }
  return out;
}

}  // namespace hc::metrics
