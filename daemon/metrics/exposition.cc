#include "daemon/metrics/exposition.h"

#include <charconv>
#include <cmath>

namespace hc::metrics {

std::string formatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // -0.0 is spelled "0": both parse to a zero and a sign there only confuses readers.
  if (value == 0) return "0";
  char buf[64];
  // 2^53: past it not every integer is a double, so plain digits would claim a precision the
  // value does not have.
  constexpr double kExactIntegerLimit = 9007199254740992.0;
  const double magnitude = std::fabs(value);
  const bool exactInteger = std::trunc(value) == value && magnitude <= kExactIntegerLimit;
  // Otherwise the shortest digits that read back to the same double, with an exponent only
  // where Go's strconv 'g' (client_golang) puts one below 1: under 1e-4. The `le` labels then
  // read "0.0001", "2.5e-05" as in other exporters, and equal bounds aggregate across them.
  const bool scientific = !exactInteger && (magnitude < 1e-4 || magnitude > kExactIntegerLimit);
  const auto result =
      std::to_chars(buf, buf + sizeof buf, value,
                    scientific ? std::chars_format::scientific : std::chars_format::fixed);
  return std::string(buf, result.ptr);
}

void appendEscapedLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

void appendEscapedHelp(std::string& out, std::string_view help) {
  for (char c : help) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

namespace {

bool isAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isAsciiDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool isValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = isAsciiLetter(c) || c == '_' || c == ':' || (i > 0 && isAsciiDigit(c));
    if (!ok) return false;
  }
  return true;
}

bool isValidLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = isAsciiLetter(c) || c == '_' || (i > 0 && isAsciiDigit(c));
    if (!ok) return false;
  }
  return true;
}

}  // namespace hc::metrics
