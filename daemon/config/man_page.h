// The daemon's manual pages, hetero-commd(8) and hetero-commd.toml(5), rendered from the same
// sources as --help and --print-config: the CLI11 command line and the settings table. Printed by
// the hidden `hetero-commd --print-man 8|5`; the build installs what it prints. Internal to
// daemon/config.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace hc::config::detail {

// hetero-commd(8): every option of `app` (the command line loadConfig parses), the environment,
// files, signals and exit status.
std::string daemonManPage(const CLI::App& app);

// hetero-commd.toml(5): one section per [section] of settings(), one entry per key with its
// default, help line, environment variable (and alias) and flag. Defaults are a default-built
// DaemonConfig's as the system daemon sees them: the socket, admin socket and state folder that
// depend on who runs the daemon are given as root's, whoever builds the page.
std::string configManPage();

}  // namespace hc::config::detail
