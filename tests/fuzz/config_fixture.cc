#include "tests/fuzz/config_fixture.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace hc::fuzz {

MemFile::MemFile() : fd_(::memfd_create("hc-fuzz-config", MFD_CLOEXEC)) {
  if (!fd_.valid()) {
    std::perror("memfd_create");
    std::abort();
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_.get());
}

void MemFile::write(std::string_view text) {
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    std::perror("memfd write");
    std::abort();
  }
}

Result<config::LoadOutcome> loadWith(const std::vector<std::string>& args, const Env& env) {
  std::vector<const char*> argv = {"hetero-commd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return config::loadConfig(static_cast<int>(argv.size()), argv.data(), env);
}

Env emptyConfigEnv() {
  static MemFile* empty = new MemFile;
  return {{"HC_CONFIG", empty->path()}};
}

void checkRoundTrip(const config::DaemonConfig& config) {
  static MemFile* file = new MemFile;
  const std::string text = config::toToml(config);
  file->write(text);
  auto again = loadWith({"--config", file->path()}, {});
  if (!again.isOk() || !(again->config == config)) {
    std::fprintf(stderr, "toToml's text does not load back as the same configuration: %s\n%s\n",
                 again.isOk() ? "the values differ" : again.status().message().c_str(),
                 text.c_str());
    if (again.isOk()) {
      std::fprintf(stderr, "loaded back:\n%s\n", config::toToml(again->config).c_str());
    }
    std::abort();
  }
}

bool isAscii(std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) {
    if (b >= 0x80) return false;
  }
  return true;
}

}  // namespace hc::fuzz
