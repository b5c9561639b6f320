// What the three configuration targets share: a file the daemon reads by its path without any
// disk (a memfd, named /proc/self/fd/N), loadConfig with "hetero-commd" as argv[0], and the
// round trip that every accepted configuration must survive (daemon_config.h: toToml's text
// "loading it gives `config` back"). Nothing here reads /etc: every load names its file.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/config/daemon_config.h"

namespace hc::fuzz {

class MemFile {
 public:
  MemFile();
  // Replaces the file's contents.
  void write(std::string_view text);
  const std::string& path() const { return path_; }

 private:
  UniqueFd fd_;
  std::string path_;
};

using Env = std::map<std::string, std::string>;

// loadConfig(["hetero-commd", args...], env).
Result<config::LoadOutcome> loadWith(const std::vector<std::string>& args, const Env& env);

// An environment whose HC_CONFIG names an empty file, so that the default /etc path is never read.
Env emptyConfigEnv();

// Aborts, printing both texts, when toToml(config) does not load back as `config`.
void checkRoundTrip(const config::DaemonConfig& config);

// True when every byte is 7-bit: TOML text holds UTF-8 only, so a value set from other bytes (an
// environment variable, a flag) has no TOML form to round-trip through.
bool isAscii(std::span<const uint8_t> bytes);

}  // namespace hc::fuzz
