// Small, forgiving readers for sysfs and procfs attributes, and PCI address handling.
// Depends on hc_common only.
//
// sysfs is not a contract: attributes come and go with kernel and driver versions, some read as
// EINVAL when a link is down, and containers hide parts of the tree. Discovery therefore treats
// every attribute as optional: each reader here returns "nothing" (std::nullopt, "" or an empty
// list) instead of failing, and callers decide what a missing value means.
// Nothing here throws: every std::filesystem call uses its error_code overload.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hc::discovery {

// The PCI id database (pci_ids.h): Debian's package pci.ids installs it here; hwdata-based
// distributions keep it in the second place, which is tried when the first is absent.
constexpr const char* kDebianPciIds = "/usr/share/misc/pci.ids";
constexpr const char* kHwdataPciIds = "/usr/share/hwdata/pci.ids";

// Where discovery reads the kernel's view of the node, and the file that names PCI devices.
// Tests point these at a fake tree.
struct SystemRoots {
  std::filesystem::path sys = "/sys";
  std::filesystem::path proc = "/proc";
  std::filesystem::path pciIds = kDebianPciIds;
};

// A whole small attribute file (at most 64 KiB), with trailing whitespace removed. NotFound when
// the file is absent; the errno's Status for anything else (a directory, EINVAL from a driver).
[[nodiscard]] Result<std::string> readAttribute(const std::filesystem::path& path);

// The attribute as text; "" when it is absent or unreadable.
std::string readText(const std::filesystem::path& path);
// A decimal integer attribute ("-1", "1500"); nullopt when absent, unreadable or not a number.
std::optional<int64_t> readDecimal(const std::filesystem::path& path);
// A hexadecimal attribute with or without "0x" ("0x10de", "0x030000"); nullopt as above.
std::optional<uint64_t> readHex(const std::filesystem::path& path);
// The last component of a symbolic link's target (`driver` -> "amdgpu"); "" when not a link.
std::string linkBasename(const std::filesystem::path& path);
// Entry names of a directory, sorted so that scans are deterministic; empty when absent.
std::vector<std::string> listDirectory(const std::filesystem::path& dir);

// Parses a decimal or hexadecimal (base 16) integer that fills all of `text`.
std::optional<int64_t> parseDecimal(std::string_view text);
std::optional<uint64_t> parseHex(std::string_view text);

// True for a PCI address with or without the domain: "0000:3b:00.0", "00000000:3B:00.0",
// "3b:00.0". Host bridge names ("pci0000:00") are not addresses.
bool isPciAddress(std::string_view text);
// The canonical form sysfs uses: 4-digit (at least) lower-case domain, "0000:3b:00.0".
// CUDA reports "00000000:3B:00.0", some tools omit the domain; all of them name the same
// function. nullopt when `text` is not a PCI address.
std::optional<std::string> normalizePciBusId(std::string_view text);

}  // namespace hc::discovery
