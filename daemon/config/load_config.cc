// loadConfig: flags are parsed first (they may name the file), then the layers are applied from
// lowest to highest precedence: files, environment, flags.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "daemon/config/daemon_config.h"
#include "daemon/config/man_page.h"
#include "daemon/config/settings.h"

namespace hc::config {
namespace {

namespace fs = std::filesystem;
using detail::Origins;
using detail::Setting;

// What the command line asked for, before any of it is applied.
struct CommandLine {
  std::string configPath;
  bool configGiven = false;
  std::vector<std::string> flagValues;  // indexed like settings(); meaningful when given
  std::vector<bool> flagGiven;
  std::vector<std::string> sets;  // --set section.key=value, in order
};

hc::Status withOrigin(const hc::Status& status, const std::string& origin) {
  if (status.isOk()) return status;
  return hc::invalidArgument(origin + ": " + status.message());
}

std::string settingsFooter() {
  std::string text =
      "\nSettings, as `key = value` under [section] in a file, as HC_<SECTION>_<KEY> in the\n"
      "environment, or as --set section.key=VALUE (lists comma-separated in the last two):\n";
  for (const Setting& s : detail::settings()) {
    text += "  " + detail::dottedName(s) + " (" + detail::envName(s) + "): " + std::string(s.help) +
            "\n";
  }
  return text;
}

const char* typeName(const Setting& s) {
  if (std::holds_alternative<uint64_t DaemonConfig::*>(s.field)) return "SIZE";
  if (std::holds_alternative<std::string DaemonConfig::*>(s.field)) return "TEXT";
  if (std::holds_alternative<double DaemonConfig::*>(s.field)) return "NUMBER";
  return "INT";
}

hc::Status parseCommandLine(int argc, const char* const* argv, CommandLine* cli, LoadOutcome* out) {
  CLI::App app("hetero-commd: executes collectives for the training processes of this node",
               "hetero-commd");
  app.footer(settingsFooter());
  CLI::Option* config =
      app.add_option("--config", cli->configPath,
                     "config file (env HC_CONFIG; default " + std::string(kDefaultConfigPath) + ")")
          ->type_name("PATH");
  const auto all = detail::settings();
  cli->flagValues.resize(all.size());
  std::vector<CLI::Option*> flags(all.size(), nullptr);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].flag.empty()) continue;
    flags[i] = app.add_option(std::string(all[i].flag), cli->flagValues[i],
                              std::string(all[i].help) + " (" + detail::dottedName(all[i]) + ")")
                   ->type_name(typeName(all[i]));
  }
  app.add_option("--set", cli->sets, "set any key below (repeatable)")
      ->allow_extra_args(false)
      ->type_name("SECTION.KEY=VALUE");
  app.add_flag("--print-config", out->printConfig, "print the effective configuration as TOML");
  app.add_flag("--check-config", out->checkConfig, "validate the configuration and exit");
  app.add_flag("--version", out->version, "print the version and exit");
  // Hidden (group ""): the build runs it to write the installed pages; operators read those.
  app.add_option("--print-man", out->manSection,
                 "print hetero-commd(8) or hetero-commd.toml(5) as roff and exit")
      ->check(CLI::IsMember({5, 8}))
      ->group("");
  try {
    if (argc > 0 && argv != nullptr) {
      app.parse(argc, argv);
    } else {
      app.parse(std::vector<std::string>{});
    }
  } catch (const CLI::CallForHelp&) {
    out->help = true;
    out->helpText = app.help();
    return {};
  } catch (const CLI::ParseError& e) {
    return hc::invalidArgument(std::string("command line: ") + e.what() + "; see --help");
  } catch (const std::exception& e) {
    return hc::invalidArgument(std::string("command line: ") + e.what());
  }
  if (out->manSection != 0) {
    out->manText = out->manSection == 8 ? detail::daemonManPage(app) : detail::configManPage();
    return {};
  }
  cli->configGiven = config->count() > 0;
  cli->flagGiven.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) cli->flagGiven[i] = flags[i] && flags[i]->count() > 0;
  return {};
}

// One table of a file: the root, a section ([exec]), or a table that leads to nested sections
// ([devices] holds [devices.sim], and may hold keys of its own). A child table named like a
// section or a parent of one is walked in turn; any other child must be a key of this section.
hc::Status loadTable(const std::string& path, const std::string& name, const toml::table& table,
                     DaemonConfig* config, Origins* origins) {
  const bool inSection = !name.empty() && detail::isSection(name);
  for (auto&& [key, node] : table) {
    const std::string full =
        name.empty() ? std::string(key.str()) : name + "." + std::string(key.str());
    if (detail::isSection(full) || detail::isSectionParent(full)) {
      const toml::table* nested = node.as_table();
      if (nested == nullptr) {
        return hc::invalidArgument(path + ": '" + full + "' must be a table [" + full + "]");
      }
      HC_RETURN_IF_ERROR(loadTable(path, full, *nested, config, origins));
      continue;
    }
    // At the root, or a table where only a key could be: name what it looks like.
    if (name.empty() || node.is_table()) {
      return hc::invalidArgument(path + ": unknown section [" + full + "]");
    }
    const Setting* s = inSection ? detail::findSetting(name, key.str()) : nullptr;
    if (s == nullptr) return hc::invalidArgument(path + ": unknown key '" + full + "'");
    HC_RETURN_IF_ERROR(withOrigin(detail::applyNode(*s, node, config), path));
    (*origins)[detail::dottedName(*s)] = path;
  }
  return {};
}

hc::Status loadFile(const std::string& path, DaemonConfig* config, Origins* origins) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return hc::invalidArgument(path + ":" + std::to_string(where.line) + ":" +
                               std::to_string(where.column) + ": " + std::string(e.description()));
  } catch (const std::exception& e) {
    return hc::invalidArgument(path + ": " + e.what());
  }
  return loadTable(path, "", root, config, origins);
}

// The main file, then conf.d/*.toml beside it in byte order. Dot-files are skipped: editors and
// package managers leave them behind (.foo.toml.swp is already excluded by its extension).
hc::Status loadFiles(const std::string& path, bool explicitPath, DaemonConfig* config,
                     std::vector<std::string>* sources, Origins* origins) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    // An unreadable /etc/hetero-comm must not silently fall back to the defaults.
    return hc::invalidArgument(path + ": " + ec.message());
  }
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return hc::invalidArgument(path + ": is a directory, not a file");
    HC_RETURN_IF_ERROR(loadFile(path, config, origins));
    sources->push_back(path);
  } else if (explicitPath) {
    return hc::invalidArgument("config file " + path + " does not exist");
  }
  const fs::path dropIns = fs::path(path).parent_path() / "conf.d";
  if (!fs::is_directory(dropIns, ec)) return {};
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dropIns, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.' || p.extension() != ".toml") continue;
    std::error_code typeEc;
    if (fs::is_regular_file(it->status(typeEc))) files.push_back(p);
  }
  if (ec) return hc::invalidArgument(dropIns.string() + ": " + ec.message());
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  for (const fs::path& file : files) {
    HC_RETURN_IF_ERROR(loadFile(file.string(), config, origins));
    sources->push_back(file.string());
  }
  return {};
}

// Empty variables count as unset, as `HC_SOCKET= hetero-commd` means "no override" in shells.
hc::Status applyEnvironment(const std::map<std::string, std::string>& env, DaemonConfig* config,
                            Origins* origins) {
  for (const auto& [name, value] : env) {
    // The longest matching prefix names the section: HC_DEVICES_SIM_X is in [devices.sim], not
    // in [devices].
    std::string_view section;
    std::string prefix;
    for (std::string_view candidate : detail::sections()) {
      std::string p = detail::envPrefix(candidate);
      if (name.starts_with(p) && p.size() > prefix.size()) {
        section = candidate;
        prefix = std::move(p);
      }
    }
    if (prefix.empty()) continue;
    bool known = false;
    for (const Setting& s : detail::settings()) known = known || detail::envName(s) == name;
    if (!known) {
      std::string key = name.substr(prefix.size());
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return hc::invalidArgument("environment variable " + name + ": no key '" +
                                 std::string(section) + "." + key + "' in [" +
                                 std::string(section) + "] (see --help)");
    }
  }
  // The short aliases first, so the full HC_<SECTION>_<KEY> name wins when both are set.
  auto apply = [&](const std::string& name, const Setting& s) -> hc::Status {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return {};
    HC_RETURN_IF_ERROR(
        withOrigin(detail::applyText(s, it->second, config), "environment variable " + name));
    (*origins)[detail::dottedName(s)] = "environment variable " + name;
    return {};
  };
  for (const detail::EnvAlias& alias : detail::envAliases()) {
    HC_RETURN_IF_ERROR(apply(std::string(alias.name), *detail::findSetting(alias.key)));
  }
  for (const Setting& s : detail::settings()) HC_RETURN_IF_ERROR(apply(detail::envName(s), s));
  return {};
}

// Dedicated flags first, then --set in the order given: the last word on a key wins.
hc::Status applyFlags(const CommandLine& cli, DaemonConfig* config, Origins* origins) {
  const auto all = detail::settings();
  for (size_t i = 0; i < all.size(); ++i) {
    if (!cli.flagGiven[i]) continue;
    const std::string origin(all[i].flag);
    HC_RETURN_IF_ERROR(withOrigin(detail::applyText(all[i], cli.flagValues[i], config), origin));
    (*origins)[detail::dottedName(all[i])] = origin;
  }
  for (const std::string& assignment : cli.sets) {
    const std::string origin = "--set " + assignment;
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos) {
      return hc::invalidArgument(origin + ": expected section.key=value");
    }
    const Setting* s = detail::findSetting(std::string_view(assignment).substr(0, eq));
    if (s == nullptr) {
      return hc::invalidArgument(origin + ": unknown key '" + assignment.substr(0, eq) + "'");
    }
    HC_RETURN_IF_ERROR(
        withOrigin(detail::applyText(*s, assignment.substr(eq + 1), config), origin));
    (*origins)[detail::dottedName(*s)] = origin;
  }
  return {};
}

}  // namespace

hc::Result<LoadOutcome> loadConfig(int argc, const char* const* argv,
                                   const std::map<std::string, std::string>& env) {
  LoadOutcome out;
  CommandLine cli;
  HC_RETURN_IF_ERROR(parseCommandLine(argc, argv, &cli, &out));
  // --version, --help and --print-man must work even when a config file is broken.
  if (out.help || out.version || out.manSection != 0) return out;

  std::string path(kDefaultConfigPath);
  bool explicitPath = false;
  if (cli.configGiven) {
    path = cli.configPath;
    explicitPath = true;
  } else if (auto it = env.find("HC_CONFIG"); it != env.end() && !it->second.empty()) {
    path = it->second;
    explicitPath = true;
  }
  DaemonConfig config;
  Origins origins;
  HC_RETURN_IF_ERROR(loadFiles(path, explicitPath, &config, &out.sources, &origins));
  HC_RETURN_IF_ERROR(applyEnvironment(env, &config, &origins));
  HC_RETURN_IF_ERROR(applyFlags(cli, &config, &origins));
  // The admin socket follows the client socket wherever that was moved, unless set itself.
  if (!origins.contains("control.admin_socket")) {
    config.controlAdminSocket = hc::adminSocketPathFor(config.socketPath);
  }
  HC_RETURN_IF_ERROR(detail::validateWithOrigins(config, &origins));
  out.config = std::move(config);
  return out;
}

}  // namespace hc::config
