// Helpers shared by the config tests: a private temporary directory and an argv builder.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "tests/support/temp_dir.h"

namespace hc::config::testing {

using Env = std::map<std::string, std::string>;

// A private folder for one test (tests/support/temp_dir.h), removed with everything in it when
// the test ends.
class TempDir : public hc::test::TempDir {
 public:
  TempDir() : hc::test::TempDir("hc-config") {}
};

// loadConfig with "hetero-commd" as argv[0].
inline hc::Result<LoadOutcome> load(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<const char*> argv = {"hetero-commd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return loadConfig(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace hc::config::testing
