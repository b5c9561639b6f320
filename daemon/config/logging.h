// The daemon's logging: spdlog's default logger, to the systemd journal when stderr is connected
// to it and to stderr otherwise. Depends on spdlog and libsystemd.
#pragma once

#include <spdlog/common.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace hc::config {

// "trace", "debug", "info", "warn", "error" or "off"; anything else is InvalidArgument.
[[nodiscard]] hc::Result<spdlog::level::level_enum> parseLogLevel(std::string_view level);

// Replaces spdlog's default logger. An unknown level logs a warning and falls back to info.
// Call from main before other threads start: spdlog's default logger is swapped unguarded.
void setupLogging(const std::string& level);

}  // namespace hc::config
