// The table of every configuration setting (section, key, field, flag, help) and the conversions
// from TOML nodes and from text (environment, flags) into DaemonConfig fields. Internal to
// daemon/config: other layers see only DaemonConfig.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "daemon/config/daemon_config.h"

namespace hc::config::detail {

// The field's C++ type decides how a value is parsed: uint64_t fields are byte sizes, double
// fields are decimal numbers (a TOML float or integer).
using Field =
    std::variant<std::string DaemonConfig::*, uint64_t DaemonConfig::*, uint32_t DaemonConfig::*,
                 int32_t DaemonConfig::*, bool DaemonConfig::*, double DaemonConfig::*,
                 std::vector<uint32_t> DaemonConfig::*,
                 std::vector<std::string> DaemonConfig::*>;

// A section is a TOML table name and may be nested ("devices.sim" is [devices.sim]); its keys
// are "devices.sim.nvidia", its environment prefix HC_DEVICES_SIM_.

struct Setting {
  std::string_view section;
  std::string_view key;
  Field field;
  std::string_view flag;  // dedicated long flag ("--spin-us"), or empty: only --set reaches it
  std::string_view help;  // one line, shown by --help and --print-config
};

std::span<const Setting> settings();
std::span<const std::string_view> sections();
bool isSection(std::string_view section);
// True when `name` is the leading part of a nested section ("devices" of "devices.sim"): a table
// that holds sections rather than keys.
bool isSectionParent(std::string_view name);
const Setting* findSetting(std::string_view section, std::string_view key);
// "section.key", e.g. "exec.spin_us".
const Setting* findSetting(std::string_view dotted);

std::string_view trim(std::string_view s);  // without leading and trailing whitespace
std::string dottedName(const Setting& s);   // "exec.spin_us"
std::string envName(const Setting& s);      // "HC_EXEC_SPIN_US"
std::string envPrefix(std::string_view section);  // "HC_EXEC_", "HC_DEVICES_SIM_"

// Short environment names kept beside HC_<SECTION>_<KEY> (which wins when both are set).
struct EnvAlias {
  std::string_view name;  // "HC_SOCKET"
  std::string_view key;   // "server.socket"
};
std::span<const EnvAlias> envAliases();

// Text from the environment, a flag or --set. Lists are comma-separated; an empty text is an
// empty list. Errors name the key; the caller prefixes where the text came from.
[[nodiscard]] hc::Status applyText(const Setting& s, std::string_view text, DaemonConfig* config);
// A value from a TOML file; the TOML type must match (sizes may also be strings like "1GiB").
[[nodiscard]] hc::Status applyNode(const Setting& s, const toml::node& node, DaemonConfig* config);
// The field's value as TOML value text, e.g. `256`, `"info"`, `["a", "b"]`.
void writeValue(const Setting& s, const DaemonConfig& config, std::ostream& out);
// "1 GiB" for whole multiples of a binary unit, so a printed size reads at a glance; else empty.
std::string humanSize(uint64_t v);

// "exec.spin_us" -> where its final value came from ("HC_EXEC_SPIN_US", "/etc/...toml", ...).
using Origins = std::map<std::string, std::string>;
// validate(), with " (set by <origin>)" added to the message when the key has a recorded origin.
[[nodiscard]] hc::Status validateWithOrigins(const DaemonConfig& config, const Origins* origins);

}  // namespace hc::config::detail
