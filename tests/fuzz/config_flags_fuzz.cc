// The daemon's command line (daemon/config: CLI11 with a flag per setting, --set, --help,
// --print-config, then the text conversions and validate): the fuzzer's bytes are argv after
// argv[0], one argument per line. An input naming --config is skipped: its path would make the
// daemon read whatever file the fuzzer names (a FIFO blocks), and config_toml_fuzz fuzzes the
// file itself; HC_CONFIG names an empty file. Accepted 7-bit command lines must survive toToml
// and load back equal (config_fixture.h).
// Input: fuzz_inputs.h, readLines.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/config_fixture.h"
#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = hc::fuzz::readLines({data, size});
  for (const std::string& a : args) {
    if (a.starts_with("--config")) return 0;
  }
  auto loaded = hc::fuzz::loadWith(args, hc::fuzz::emptyConfigEnv());
  if (loaded.isOk() && !loaded->help && !loaded->version && hc::fuzz::isAscii({data, size})) {
    hc::fuzz::checkRoundTrip(loaded->config);
  }
  return 0;
}
