#include "daemon/discovery/pci_ids.h"

#include <fstream>
#include <string_view>

#include "daemon/discovery/sysfs_files.h"  // kDebianPciIds, kHwdataPciIds

namespace hc::discovery {
namespace fs = std::filesystem;

namespace {

enum class LineStatus : uint8_t { Complete, TooLong, End };

// The next line of `in` without its '\n', at most kMaxPciIdsLineBytes of it. A last line without
// a newline counts as the end: the file was cut short, and a cut name would be a wrong name.
LineStatus nextLine(std::streambuf& in, std::string& line, size_t& bytesLeft) {
  line.clear();
  bool tooLong = false;
  while (bytesLeft > 0) {
    int c = in.sbumpc();
    if (c == std::char_traits<char>::eof()) return LineStatus::End;
    --bytesLeft;
    if (c == '\n') return tooLong ? LineStatus::TooLong : LineStatus::Complete;
    if (line.size() < kMaxPciIdsLineBytes) {
      line.push_back(static_cast<char>(c));
    } else {
      tooLong = true;
    }
  }
  return LineStatus::End;
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view withoutBlanks(std::string_view text) {
  while (!text.empty() && isBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && isBlank(text.back())) text.remove_suffix(1);
  return text;
}

// Exactly four hexadecimal digits at the start of `text`, consumed.
std::optional<uint16_t> takeId(std::string_view& text) {
  if (text.size() < 4) return std::nullopt;
  uint16_t id = 0;
  for (char c : text.substr(0, 4)) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    id = static_cast<uint16_t>(id << 4 | digit);
  }
  text.remove_prefix(4);
  return id;
}

// "<id> <blanks> <name>": the id, and the name without surrounding blanks. nullopt when either is
// missing or nothing separates them ("10de" alone, "10deNVIDIA").
std::optional<uint16_t> takeIdBeforeName(std::string_view& text) {
  std::optional<uint16_t> id = takeId(text);
  if (!id || text.empty() || !isBlank(text.front())) return std::nullopt;
  text = withoutBlanks(text);
  if (text.empty()) return std::nullopt;
  return id;
}

struct ParsedLine {
  size_t depth = 0;  // leading tabs: 0 vendor (or class), 1 device, 2 subsystem
  std::string_view text;
};

// Strips a '\r' (CRLF files) and the indentation; nullopt for blank lines and comments.
std::optional<ParsedLine> parseLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ParsedLine parsed;
  while (parsed.depth < line.size() && line[parsed.depth] == '\t') ++parsed.depth;
  parsed.text = line.substr(parsed.depth);
  if (withoutBlanks(parsed.text).empty() || parsed.text.front() == '#') return std::nullopt;
  return parsed;
}

}  // namespace

std::optional<PciIdVendor> readPciIdVendor(std::istream& in, uint16_t vendorId) {
  std::streambuf* buffer = in.rdbuf();
  if (buffer == nullptr) return std::nullopt;
  size_t bytesLeft = kMaxPciIdsFileBytes;
  std::optional<PciIdVendor> vendor;
  PciIdVendor::Device* device = nullptr;  // the device that subsystem lines belong to
  std::string line;
  for (LineStatus status; (status = nextLine(*buffer, line, bytesLeft)) != LineStatus::End;) {
    if (status == LineStatus::TooLong) continue;
    std::optional<ParsedLine> parsed = parseLine(line);
    if (!parsed) continue;
    std::string_view text = parsed->text;
    if (parsed->depth == 0) {
      // Any top-level line after our vendor starts the next section. The class section ("C 03")
      // comes after every vendor, and its indented lines are classes, not devices.
      if (vendor || text.substr(0, 2) == "C ") break;
      std::optional<uint16_t> id = takeIdBeforeName(text);
      if (id && *id == vendorId) vendor.emplace().name = std::string(text);
      continue;
    }
    if (!vendor) continue;
    if (parsed->depth == 1) {
      std::optional<uint16_t> id = takeIdBeforeName(text);
      device = nullptr;
      if (!id) continue;
      auto [entry, added] = vendor->devices.try_emplace(*id);
      if (added) entry->second.name = std::string(text);
      device = &entry->second;
    } else if (parsed->depth == 2 && device != nullptr) {
      std::optional<uint16_t> subvendor = takeId(text);
      if (!subvendor || text.empty() || text.front() != ' ') continue;
      text.remove_prefix(1);
      std::optional<uint16_t> subdevice = takeIdBeforeName(text);
      if (!subdevice) continue;
      device->subsystems.try_emplace(static_cast<uint32_t>(*subvendor) << 16 | *subdevice,
                                     std::string(text));
    }
  }
  return vendor;
}

PciIdDatabase::PciIdDatabase(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_ == kDebianPciIds && !fs::exists(path_, ec) && fs::exists(kHwdataPciIds, ec)) {
    path_ = kHwdataPciIds;
  }
}

const PciIdVendor* PciIdDatabase::vendor(uint16_t vendorId) {
  auto it = vendors_.find(vendorId);
  if (it == vendors_.end()) {
    std::optional<PciIdVendor> section;
    std::error_code ec;
    if (fs::is_regular_file(path_, ec)) {
      std::ifstream in(path_, std::ios::binary);
      if (in) section = readPciIdVendor(in, vendorId);
    }
    it = vendors_.emplace(vendorId, std::move(section)).first;
  }
  return it->second ? &*it->second : nullptr;
}

std::string PciIdDatabase::name(uint16_t vendorId, uint16_t deviceId, uint16_t subsystemVendorId,
                                uint16_t subsystemDeviceId) {
  const PciIdVendor* section = vendor(vendorId);
  if (section == nullptr) return {};
  auto device = section->devices.find(deviceId);
  if (device == section->devices.end()) return {};
  if (subsystemVendorId != 0 || subsystemDeviceId != 0) {
    auto subsystem = device->second.subsystems.find(static_cast<uint32_t>(subsystemVendorId) << 16 |
                                                    subsystemDeviceId);
    if (subsystem != device->second.subsystems.end()) return subsystem->second;
  }
  return device->second.name;
}

}  // namespace hc::discovery
