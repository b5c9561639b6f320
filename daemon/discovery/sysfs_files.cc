#include "daemon/discovery/sysfs_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>

#include "common/unique_fd.h"

namespace hc::discovery {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxAttributeBytes = 64 * 1024;

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool allHex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

Result<std::string> readAttribute(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return systemError("open " + path.string(), errno);
  std::string text;
  char buffer[4096];
  while (text.size() < kMaxAttributeBytes) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return systemError("read " + path.string(), errno);
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  // sysfs values end in a newline; only the trailing side is trimmed so that procfs key/value
  // files keep their layout.
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::string readText(const fs::path& path) {
  Result<std::string> text = readAttribute(path);
  return text.isOk() ? std::string(trimmed(*text)) : std::string();
}

std::optional<int64_t> parseDecimal(std::string_view text) {
  text = trimmed(text);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<uint64_t> parseHex(std::string_view text) {
  text = trimmed(text);
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
  }
  if (!allHex(text)) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> readDecimal(const fs::path& path) {
  Result<std::string> text = readAttribute(path);
  return text.isOk() ? parseDecimal(*text) : std::nullopt;
}

std::optional<uint64_t> readHex(const fs::path& path) {
  Result<std::string> text = readAttribute(path);
  return text.isOk() ? parseHex(*text) : std::nullopt;
}

std::string linkBasename(const fs::path& path) {
  std::error_code ec;
  fs::path target = fs::read_symlink(path, ec);
  if (ec) return {};
  return target.filename().string();
}

std::vector<std::string> listDirectory(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool isPciAddress(std::string_view text) { return normalizePciBusId(text).has_value(); }

std::optional<std::string> normalizePciBusId(std::string_view text) {
  // [domain:]bus:device.function, each field hexadecimal.
  text = trimmed(text);
  size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view function = text.substr(dot + 1);
  std::string_view rest = text.substr(0, dot);
  size_t lastColon = rest.rfind(':');
  if (lastColon == std::string_view::npos) return std::nullopt;
  std::string_view device = rest.substr(lastColon + 1);
  rest = rest.substr(0, lastColon);
  size_t colon = rest.rfind(':');
  std::string_view bus = colon == std::string_view::npos ? rest : rest.substr(colon + 1);
  std::string_view domain = colon == std::string_view::npos ? "0" : rest.substr(0, colon);

  if (!allHex(domain) || domain.size() > 8 || !allHex(bus) || bus.size() > 2 || !allHex(device) ||
      device.size() > 2 || !allHex(function) || function.size() != 1) {
    return std::nullopt;
  }
  uint64_t dev = *parseHex(device);
  uint64_t fn = *parseHex(function);
  if (dev > 0x1f || fn > 7) return std::nullopt;
  char out[32];
  std::snprintf(out, sizeof(out), "%04llx:%02llx:%02llx.%llx",
                static_cast<unsigned long long>(*parseHex(domain)),
                static_cast<unsigned long long>(*parseHex(bus)),
                static_cast<unsigned long long>(dev), static_cast<unsigned long long>(fn));
  return std::string(out);
}

}  // namespace hc::discovery
