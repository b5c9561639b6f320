// Registry: named metric families (counters, gauges, histograms with fixed buckets), each with a
// fixed list of label names, rendered as the Prometheus text exposition format 0.0.4.
// Generic: it knows nothing of the daemon (daemon_metrics.h holds the daemon's own set).
// Depends on hc_common (HC_CHECK) and the C++ standard library only.
//
// Threads: every method may be called from any thread. Each family has its own mutex, so the
// IPC thread updating one family never waits for a render of another; render() takes each
// family's lock in turn, so a scrape sees each family at one instant (not the whole registry).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace hc::metrics {

// One value per label name of the family, in the same order.
using LabelValues = std::vector<std::string>;

class Family {
 public:
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return labelNames_; }
  // "counter", "gauge" or "histogram": the word on the TYPE line.
  virtual std::string_view typeName() const = 0;
  // Appends this family's sample lines; series in the order of their label values.
  virtual void renderSamples(std::string& out) const = 0;

 protected:
  Family(std::string name, std::string help, std::vector<std::string> labelNames);
  // Appends `<name><suffix>{l1="v1",...[,extraName="extraValue"]}`, or no braces without labels.
  void appendSeriesName(std::string& out, std::string_view suffix, const LabelValues& values,
                        std::string_view extraName = {}, std::string_view extraValue = {}) const;
  // A label value list of the wrong length is a bug in the caller: fatal (HC_CHECK).
  void checkArity(const LabelValues& values) const;

  mutable std::mutex mu_;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> labelNames_;
};

// A value per label set; the base of counters and gauges.
class ScalarFamily : public Family {
 public:
  void renderSamples(std::string& out) const override;

 protected:
  using Family::Family;
  std::map<LabelValues, double> values_;  // guarded by mu_
};

// Only ever goes up. A series appears at its first add() (add(values, 0) makes it visible at 0).
class CounterFamily final : public ScalarFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> labelNames)
      : ScalarFamily(std::move(name), std::move(help), std::move(labelNames)) {}
  std::string_view typeName() const override { return "counter"; }
  // A negative or NaN amount is dropped: a counter that went down would read as a restart.
  void add(const LabelValues& values, double amount);
};

class GaugeFamily final : public ScalarFamily {
 public:
  GaugeFamily(std::string name, std::string help, std::vector<std::string> labelNames)
      : ScalarFamily(std::move(name), std::move(help), std::move(labelNames)) {}
  std::string_view typeName() const override { return "gauge"; }
  void set(const LabelValues& values, double value);
  void add(const LabelValues& values, double delta);
};

// Fixed upper bounds chosen at registration; the "+Inf" bucket is implicit. A value lands in the
// first bucket whose bound is >= the value (Prometheus' `le`); NaN lands in +Inf only.
class HistogramFamily final : public Family {
 public:
  // `bounds`: finite, strictly increasing (a trailing +Inf is accepted and dropped); else fatal.
  HistogramFamily(std::string name, std::string help, std::vector<std::string> labelNames,
                  std::vector<double> bounds);
  std::string_view typeName() const override { return "histogram"; }
  void observe(const LabelValues& values, double value);
  void renderSamples(std::string& out) const override;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  struct Series {
    std::vector<uint64_t> bucketCounts;  // per bound, then +Inf; not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  std::vector<double> bounds_;
  std::map<LabelValues, Series> series_;  // guarded by mu_
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each returns the family, creating it on first use. Asking again for a name with the same
  // kind and label names returns the same family; a different kind, labels or buckets under a
  // used name, or an illegal metric or label name, is a bug: fatal (HC_CHECK). The reference
  // lives as long as the registry.
  CounterFamily& counter(std::string name, std::string help,
                         std::vector<std::string> labelNames = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labelNames = {});
  HistogramFamily& histogram(std::string name, std::string help,
                             std::vector<std::string> labelNames, std::vector<double> bounds);

  // Every family in registration order: HELP, TYPE, then its samples. A family without samples
  // still prints HELP and TYPE, so dashboards see it exists before the first event.
  std::string render() const;

 private:
  // The family named `name`, or null; checks that a found one has the expected kind and labels.
  Family* find(std::string_view name, std::string_view typeName,
               const std::vector<std::string>& labelNames) const;
  void checkNames(const std::string& name, const std::vector<std::string>& labelNames) const;

  mutable std::mutex mu_;  // guards families_ (the list, not the families' values)
  std::vector<std::unique_ptr<Family>> families_;
};

}  // namespace hc::metrics
