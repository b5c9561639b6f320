#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace hc::test {

std::string makeTempDir(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" +
                        std::string(prefix) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

void removeTempDir(const std::string& dir) {
  if (dir.empty() || std::getenv("HC_INTEG_KEEP") != nullptr) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TempDir::TempDir(std::string_view prefix) : path_(makeTempDir(prefix)) {
  if (path_.empty()) {
    throw std::runtime_error("mkdtemp " + std::string(prefix) + ": " + std::strerror(errno));
  }
}

TempDir::~TempDir() { removeTempDir(path_); }

std::string TempDir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

std::string TempDir::write(const std::string& relative, const std::string& content) const {
  const std::filesystem::path full = std::filesystem::path(path_) / relative;
  std::filesystem::create_directories(full.parent_path());
  std::ofstream(full) << content;
  return full.string();
}

}  // namespace hc::test
