#include "tools/hcctl/top_frame.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace hc::hcctl::top {
namespace {

std::string printed(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// `text` padded to `width`, and always one space after it, so a long cell never runs into the
// next column.
std::string cell(const std::string& text, size_t width) {
  return text + std::string(text.size() < width ? width - text.size() + 1 : 1, ' ');
}

std::string cutTo(std::string line, size_t width) {
  if (width != 0 && line.size() > width) line.resize(width);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

// "3f2a9c01" of a 32-digit key; a split's "<parent>/<seq>.<color>" keeps its suffix.
std::string shortKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return key.substr(0, 8);
  return key.substr(0, std::min<size_t>(slash, 8)) + key.substr(slash);
}

std::string clockOf(int64_t wallNs) {
  const time_t seconds = static_cast<time_t>(wallNs / 1'000'000'000);
  struct tm local {};
  char text[16] = "--:--:--";
  if (localtime_r(&seconds, &local) != nullptr)
    std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// "3d 04:05:06", "0:12:30".
std::string uptimeOf(uint64_t ms) {
  const uint64_t s = ms / 1000;
  char text[48];
  const uint64_t days = s / 86400;
  std::snprintf(text, sizeof text, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, (s % 86400) / 3600,
                (s % 3600) / 60, s % 60);
  return days == 0 ? text : std::to_string(days) + "d " + text;
}

std::string headerLine(const Source& source, int64_t wallNs) {
  std::string line = "hcctl top - " + (source.hostname.empty() ? "?" : source.hostname) +
                     " - hetero-commd " + (source.version.empty() ? "?" : source.version) + " at " +
                     source.target + " - " + clockOf(wallNs);
  return line + " - every " + printed("%g", source.intervalSeconds) + " s";
}

std::string lastOpText(const CommSample& c, int64_t nowNs) {
  if (!c.lastOp) return "-";
  const LastOp& op = *c.lastOp;
  return op.name + " #" + std::to_string(op.seq) + " " + op.state + " " +
         formatAge(nowNs - op.postedNs);
}

std::string waitingText(const CommSample& c) {
  if (!c.waitingError.empty()) return "? (" + c.waitingError + ")";
  if (c.waitingSeq == 0 || c.waitingFor.empty()) return "-";
  return formatRanks(c.waitingFor) + " (collective #" + std::to_string(c.waitingSeq) + ")";
}

struct Column {
  const char* title;
  size_t width;
};
constexpr Column kColumns[] = {{"ID", 4},     {"KEY", 12},   {"RANKS", 5},    {"LOCAL", 6},
                               {"STATE", 6},  {"OPS/S", 8},  {"BYTES/S", 12}, {"OPS", 8},
                               {"BYTES", 10}, {"FAILED", 6}, {"LAST OP", 32}};

std::string row(const std::vector<std::string>& cells, const std::string& last) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += cell(cells[i], kColumns[i].width);
  return line + last;
}

}  // namespace

CommRates ratesOf(const CommSample& now, const Sample& before, double seconds) {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  for (const CommSample& b : before.comms) {
    if (b.id != now.id || b.key != now.key) continue;
    ops = b.opsCompleted;
    bytes = b.bytesCompleted;
  }
  if (seconds <= 0) return {};
  auto gained = [](uint64_t to, uint64_t from) {
    return to >= from ? static_cast<double>(to - from) : 0.0;
  };
  return {gained(now.opsCompleted, ops) / seconds, gained(now.bytesCompleted, bytes) / seconds};
}

int64_t wallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string formatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return printed("%.0f", bytes < 1 ? 0 : bytes) + " B";
  size_t unit = 0;
  bytes /= 1024;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return printed("%.1f", bytes) + " " + kUnits[unit];
}

std::string formatAge(int64_t ns) {
  const int64_t ms = std::max<int64_t>(0, ns) / 1'000'000;
  if (ms < 1000) return std::to_string(ms) + "ms";
  if (ms < 60'000) return printed("%.1f", static_cast<double>(ms) / 1000) + "s";
  if (ms < 3'600'000) return std::to_string(ms / 60'000) + "m";
  if (ms < 86'400'000) return std::to_string(ms / 3'600'000) + "h";
  return std::to_string(ms / 86'400'000) + "d";
}

std::string formatRanks(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(sorted[i]);
    if (j > i) out += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::string formatFrame(const Source& source, const Sample& before, const Sample& now,
                        size_t width) {
  const double seconds = std::chrono::duration<double>(now.taken - before.taken).count();
  std::vector<CommRates> rates;
  CommRates total;
  uint64_t failures = 0;
  size_t failedComms = 0;
  for (const CommSample& c : now.comms) {
    rates.push_back(ratesOf(c, before, seconds));
    total.opsPerSecond += rates.back().opsPerSecond;
    total.bytesPerSecond += rates.back().bytesPerSecond;
    failures += c.opsFailed;
    failedComms += c.state == "failed" ? 1 : 0;
  }
  std::string out = cutTo(headerLine(source, now.wallNs), width);
  out += cutTo(
      "up " + uptimeOf(now.uptimeMs) + ", " + std::to_string(now.clients) + " clients, " +
          std::to_string(now.comms.size()) + " communicators (" + std::to_string(failedComms) +
          " failed), " + printed("%.1f", total.opsPerSecond) + " ops/s, " +
          formatBytes(total.bytesPerSecond) + "/s, " + std::to_string(failures) + " failed ops",
      width);
  out += "\n";
  std::vector<std::string> titles;
  for (const Column& column : kColumns) titles.push_back(column.title);
  titles.pop_back();
  out += cutTo(row(titles, cell(kColumns[10].title, kColumns[10].width) + "WAITING FOR"), width);
  if (now.comms.empty()) out += cutTo("(no communicators)", width);
  for (size_t i = 0; i < now.comms.size(); ++i) {
    const CommSample& c = now.comms[i];
    std::vector<std::string> cells = {std::to_string(c.id),
                                      shortKey(c.key),
                                      std::to_string(c.nranks),
                                      formatRanks(c.localRanks),
                                      c.state,
                                      printed("%.1f", rates[i].opsPerSecond),
                                      formatBytes(rates[i].bytesPerSecond) + "/s",
                                      std::to_string(c.opsCompleted),
                                      formatBytes(static_cast<double>(c.bytesCompleted)),
                                      std::to_string(c.opsFailed)};
    out += cutTo(row(cells, cell(lastOpText(c, now.wallNs), kColumns[10].width)) + waitingText(c),
                 width);
  }
  return out;
}

std::string formatUnavailable(const Source& source, int64_t wallNs, const std::string& why,
                              size_t width) {
  return cutTo(headerLine(source, wallNs), width) + cutTo(why, width);
}

}  // namespace hc::hcctl::top
