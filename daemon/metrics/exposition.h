// The pieces of the Prometheus text exposition format 0.0.4 that every family needs: how a number
// is spelled, how label values and HELP text are escaped, and which names are legal.
// (https://prometheus.io/docs/instrumenting/exposition_formats/)
// Depends on the C++ standard library only.
#pragma once

#include <string>
#include <string_view>

namespace hc::metrics {

// A sample value or an `le` bound as Prometheus parses it: "+Inf", "-Inf", "NaN"; integral values
// up to 2^53 as plain digits ("1048576", never "1.048576e+06"); anything else in the fewest
// digits that read back to the same double, with an exponent only below 1e-4 or above 2^53
// ("0.25", "0.0001", "2.5e-05", "1e+300").
std::string formatValue(double value);

// Appends `value` with backslash, double quote and newline escaped (label values).
void appendEscapedLabelValue(std::string& out, std::string_view value);
// Appends `help` with backslash and newline escaped (HELP lines; quotes stay as they are).
void appendEscapedHelp(std::string& out, std::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool isValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, and not starting with "__" (reserved for Prometheus itself).
bool isValidLabelName(std::string_view name);

}  // namespace hc::metrics
