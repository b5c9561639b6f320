#include "daemon/config/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

namespace hc::config {
namespace {

constexpr const char* kStderrPattern = "[%Y-%m-%d %H:%M:%S.%e] [%l] %v";

// systemd sets JOURNAL_STREAM=<dev>:<inode> for a service whose stderr goes to the journal.
// The variable is inherited by children whose stderr may point elsewhere (a shell started from
// the service, `hetero-commd --check-config 2>file`), so systemd.exec(5) says to compare it with
// stderr itself before switching to native journal records.
bool stderrIsJournal() {
  const char* value = std::getenv("JOURNAL_STREAM");
  if (value == nullptr || *value == '\0') return false;
  uintmax_t dev = 0;
  uintmax_t ino = 0;
  if (std::sscanf(value, "%" SCNuMAX ":%" SCNuMAX, &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == dev && static_cast<uintmax_t>(st.st_ino) == ino;
}

}  // namespace

hc::Result<spdlog::level::level_enum> parseLogLevel(std::string_view level) {
  using spdlog::level::level_enum;
  constexpr std::array<std::pair<std::string_view, level_enum>, 6> kLevels = {{
      {"trace", level_enum::trace},
      {"debug", level_enum::debug},
      {"info", level_enum::info},
      {"warn", level_enum::warn},
      {"error", level_enum::err},
      {"off", level_enum::off},
  }};
  for (auto [name, value] : kLevels) {
    if (name == level) return value;
  }
  return hc::invalidArgument("unknown log level '" + std::string(level) +
                             "' (trace, debug, info, warn, error, off)");
}

void setupLogging(const std::string& level) {
  auto parsed = parseLogLevel(level);
  spdlog::sink_ptr sink;
  if (stderrIsJournal()) {
    // The journal stamps time and priority itself; the record carries only the message.
    sink = std::make_shared<spdlog::sinks::systemd_sink_mt>("hetero-commd");
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    sink->set_pattern(kStderrPattern);
  }
  auto logger = std::make_shared<spdlog::logger>("hetero-commd", std::move(sink));
  logger->set_level(parsed ? parsed.value() : spdlog::level::info);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  if (!parsed) spdlog::warn("{}; logging at info", parsed.status().message());
}

}  // namespace hc::config
