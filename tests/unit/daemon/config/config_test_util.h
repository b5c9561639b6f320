// Helpers shared by the config tests: a private temporary directory and an argv builder.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"

namespace hc::config::testing {

using Env = std::map<std::string, std::string>;

// A mkdtemp directory, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hc-config-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` to path()/relative (creating folders) and returns the full path.
  std::string write(const std::string& relative, const std::string& content) const {
    std::filesystem::path full = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full) << content;
    return full.string();
  }

 private:
  std::string path_;
};

// loadConfig with "hetero-commd" as argv[0].
inline hc::Result<LoadOutcome> load(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<const char*> argv = {"hetero-commd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return loadConfig(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace hc::config::testing
