// The daemon's configuration file parser (daemon/config: toml++, then the settings table's
// conversions, then validate): the fuzzer's bytes are the whole file that --config names. Every
// file the daemon accepts must survive toToml and load back equal (config_fixture.h).
// Input: the file's text, as it is.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/config_fixture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static hc::fuzz::MemFile* file = new hc::fuzz::MemFile;
  file->write({reinterpret_cast<const char*>(data), size});
  auto loaded = hc::fuzz::loadWith({"--config", file->path()}, {});
  if (loaded.isOk()) hc::fuzz::checkRoundTrip(loaded->config);
  return 0;
}
