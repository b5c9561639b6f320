// The daemon's HC_* environment parser (daemon/config: the section prefixes, the short aliases,
// the text conversions of every setting, then validate): the fuzzer's bytes are the environment,
// one NAME=VALUE per line. HC_CONFIG always names an empty file, whatever the input says, so
// the file parser (config_toml_fuzz) stays out of it. Accepted 7-bit environments must survive
// toToml and load back equal (config_fixture.h).
// Input: fuzz_inputs.h, readLines.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/config_fixture.h"
#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hc::fuzz::Env env;
  for (const std::string& line : hc::fuzz::readLines({data, size})) {
    const size_t eq = line.find('=');
    env[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  for (auto& [name, value] : hc::fuzz::emptyConfigEnv()) env[name] = value;
  auto loaded = hc::fuzz::loadWith({}, env);
  if (loaded.isOk() && hc::fuzz::isAscii({data, size})) hc::fuzz::checkRoundTrip(loaded->config);
  return 0;
}
