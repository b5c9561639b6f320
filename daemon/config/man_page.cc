#include "daemon/config/man_page.h"

#include <CLI/CLI.hpp>

#include <sstream>
#include <string_view>

#include "common/man_page.h"
#include "common/paths.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/settings.h"

namespace hc::config::detail {
namespace {

using hc::man::escape;

std::string systemAdminSocket() { return hc::adminSocketPathFor(std::string(kSystemSocketPath)); }

// A default-built configuration as root gets it (see configManPage in the header).
DaemonConfig systemDefaults() {
  DaemonConfig config;
  config.socketPath = std::string(kSystemSocketPath);
  config.stateDir = std::string(kSystemStateDir);
  config.controlAdminSocket = systemAdminSocket();
  return config;
}

// "key = value" as --print-config writes the line, with the size in binary units beside it.
std::string entryTag(const Setting& s, const DaemonConfig& config) {
  std::ostringstream value;
  writeValue(s, config, value);
  std::string tag = "\\fB" + escape(s.key) + "\\fR = " + escape(value.str());
  if (const auto* size = std::get_if<uint64_t DaemonConfig::*>(&s.field)) {
    if (std::string human = humanSize(config.**size); !human.empty()) {
      tag += " (" + escape(human) + ")";
    }
  }
  return tag;
}

std::string entryBody(const Setting& s) {
  const std::string dotted = dottedName(s);
  std::string body = escape(s.help) + "\n.br\nEnvironment: \\fB" + escape(envName(s)) + "\\fR";
  for (const EnvAlias& alias : envAliases()) {
    if (alias.key == dotted) body += ", or \\fB" + escape(alias.name) + "\\fR";
  }
  body += "; command line: \\fB" + escape("--set " + dotted + "=") + "\\fIVALUE\\fR";
  if (!s.flag.empty()) body += " or \\fB" + escape(s.flag) + "\\fR";
  return body + ".\n";
}

}  // namespace

std::string daemonManPage(const CLI::App& app) {
  const std::string configPath(kDefaultConfigPath);
  const std::string socket(kSystemSocketPath);
  const std::string stateDir(kSystemStateDir);
  hc::man::PageText text;
  text.name = "hetero-commd";
  text.section = "8";
  text.manual = "System Administration";
  text.summary =
      "the hetero-comm daemon that runs collectives for the training processes of a node";
  text.description =
      "Training processes (through libhcclient, or the NCCL and RCCL shims) connect to the "
      "daemon's Unix socket, share memory with it, and submit collectives; the daemon runs them "
      "among the node's ranks and, with [peer] listen set, with the daemons of other nodes. "
      "Operators query it with hcctl(1) over its admin socket.\n\n"
      "The configuration comes from " +
      configPath +
      " and conf.d/*.toml beside it, then HC_<SECTION>_<KEY> environment variables, then the "
      "options below: each layer overrides the one before. hetero-commd.toml(5) lists every key. "
      "--print-config prints the result, --check-config validates it.\n\n"
      "Under systemd the daemon is Type=notify: it sends READY=1 once it serves, STOPPING=1 "
      "when it drains, and WATCHDOG=1 while every loop turns; with the socket unit it takes the "
      "client socket systemd listens on (LISTEN_FDS) instead of binding it.";
  std::vector<std::pair<std::string, std::string>> environment = {
      {"HC_CONFIG", "the configuration file, when --config does not name one"},
      {"HC_<SECTION>_<KEY>",
       "any key of hetero-commd.toml(5), e.g. HC_EXEC_SPIN_US or HC_DEVICES_SIM_NVIDIA; lists "
       "are comma-separated, an empty value counts as unset, and an unknown name in a known "
       "section is an error"}};
  for (const EnvAlias& alias : envAliases()) {
    environment.emplace_back(
        std::string(alias.name),
        "the same as " + envName(*findSetting(alias.key)) + ", which wins when both are set");
  }
  environment.emplace_back("STATE_DIRECTORY",
                           "systemd's StateDirectory=: the default of server.state_dir");
  environment.emplace_back("XDG_RUNTIME_DIR",
                           "for a user other than root, the default socket folder "
                           "($XDG_RUNTIME_DIR/hetero-comm)");
  text.sections = {
      {"ENVIRONMENT", "", std::move(environment)},
      {"FILES",
       "",
       {{configPath,
         "the configuration file (hetero-commd.toml(5)); the defaults apply without it"},
        {"/etc/hetero-comm/conf.d/*.toml",
         "read after the main file in byte order; dot-files are skipped"},
        {socket,
         "the client socket (server.socket) of the system daemon: SOCK_SEQPACKET, mode 0660, "
         "group hetero-comm"},
        {systemAdminSocket(),
         "the admin socket (control.admin_socket): gRPC Health and Control, for hcctl(1)"},
        {stateDir + "/flight-*.json",
         "flight records of stuck or failed communicators (server.state_dir)"},
        {DaemonConfig{}.peerTokenFile,
         "the cluster token daemons of other nodes must present (peer.token_file), mode 0600"}}},
      {"SIGNALS",
       "",
       {{"SIGTERM, SIGINT",
         "drain: Health reports NOT_SERVING, no new clients are accepted, unmatched operations "
         "fail, running ones finish; then the daemon exits 0"},
        {"SIGHUP",
         "not handled: it ends the daemon. There is no reload; restart the service to apply a "
         "new configuration"}}},
      {"EXIT STATUS",
       "",
       {{"0",
         "stopped by SIGTERM or SIGINT after the drain, or --help, --version, "
         "--print-config or --check-config succeeded"},
        {"1", "the daemon could not start (socket, devices, listeners); the log says why"},
        {"2",
         "the command line, a configuration file or an HC_* variable is invalid; the "
         "message names the file, variable or option and the key"}}}};
  text.seeAlso = {"hetero-commd.toml(5)", "hcctl(1)", "hc-perf(1)", "systemd.socket(5)"};
  return hc::man::render(app, text);
}

std::string configManPage() {
  hc::man::PageText text;
  text.name = "hetero-commd.toml";
  text.section = "5";
  text.manual = "File Formats";
  text.summary = "configuration of hetero-commd";
  std::string out = hc::man::header(text);
  out += ".SH SYNOPSIS\n" + escape(kDefaultConfigPath) + "\n.br\n" +
         escape("/etc/hetero-comm/conf.d/*.toml") + "\n";
  out += hc::man::section(
      {"DESCRIPTION",
       "hetero-commd(8) reads its configuration from a TOML file, " +
           std::string(kDefaultConfigPath) +
           " unless --config or HC_CONFIG names another, then every conf.d/*.toml beside it in "
           "byte order. Each key below may also be set by its environment variable "
           "HC_<SECTION>_<KEY> or on the command line by --set section.key=VALUE (lists "
           "comma-separated in both); flags override the environment, which overrides the "
           "files, which override the defaults. An unknown section or key is an error.\n\n"
           "Sizes are bytes, or text with a binary suffix: \"4096\", \"512MiB\", \"2 G\", "
           "\"64k\" (K, M, G, T and KiB, MiB, GiB, TiB are all powers of 1024).\n\n"
           "Each entry shows the key with its default, as hetero-commd --print-config prints "
           "it for the system daemon: server.socket, server.state_dir and control.admin_socket "
           "differ for other users, as their descriptions say. hetero-commd --print-config "
           "prints the configuration in effect; --check-config validates it.",
       {}});
  const DaemonConfig defaults = systemDefaults();
  std::string_view current;
  for (const Setting& s : settings()) {
    if (s.section != current) {
      current = s.section;
      out += ".SH \"[" + escape(current) + "]\"\n";
    }
    out += hc::man::rawItem(entryTag(s, defaults), entryBody(s));
  }
  out += hc::man::section(
      {"EXAMPLE",
       "A daemon that joins others over the network, with a Prometheus endpoint and a longer "
       "operation timeout:",
       {}});
  out +=
      ".PP\n.nf\n.RS\n[peer]\nlisten = \"0.0.0.0:50051\"\nadvertise = \"node1:50051\"\n\n"
      "[metrics]\nlisten = \"127.0.0.1:9410\"\n\n[comm]\nop_timeout_ms = 600000\n.RE\n.fi\n";
  out += hc::man::seeAlso({"hetero-commd(8)", "hcctl(1)"});
  return out;
}

}  // namespace hc::config::detail
