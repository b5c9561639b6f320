#include "daemon/device/hip/hip_kernel_image.h"

#include <cstring>

// Defined by embed_hip_bundle.S (the bundle's bytes, and the address just past them).
extern "C" const uint8_t hc_reduce_hip_bundle[];
extern "C" const uint8_t hc_reduce_hip_bundle_end[];

namespace hc::device {
namespace {

// Far above any real bundle (ours has three entries); a larger count means it is not one.
constexpr uint64_t kMaxBundleEntries = 4096;

// Reads a little-endian uint64 at `*at` and advances; false when it would run past the end.
bool readU64(std::span<const uint8_t> bytes, size_t* at, uint64_t* out) {
  if (bytes.size() < sizeof(uint64_t) || *at > bytes.size() - sizeof(uint64_t)) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(uint64_t); ++i) {
    value |= static_cast<uint64_t>(bytes[*at + i]) << (8 * i);
  }
  *at += sizeof(uint64_t);
  *out = value;
  return true;
}

}  // namespace

std::span<const uint8_t> reduceKernelBundle() {
  return {hc_reduce_hip_bundle,
          static_cast<size_t>(hc_reduce_hip_bundle_end - hc_reduce_hip_bundle)};
}

Result<std::vector<OffloadBundleEntry>> readOffloadBundle(std::span<const uint8_t> bundle) {
  if (bundle.size() < kOffloadBundleMagic.size() ||
      std::memcmp(bundle.data(), kOffloadBundleMagic.data(), kOffloadBundleMagic.size()) != 0) {
    return invalidArgument("not a clang offload bundle: no __CLANG_OFFLOAD_BUNDLE__ magic");
  }
  size_t at = kOffloadBundleMagic.size();
  uint64_t count = 0;
  if (!readU64(bundle, &at, &count)) return invalidArgument("offload bundle: truncated header");
  if (count == 0 || count > kMaxBundleEntries) {
    return invalidArgument("offload bundle: implausible entry count " + std::to_string(count));
  }
  std::vector<OffloadBundleEntry> entries;
  entries.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    OffloadBundleEntry entry;
    uint64_t idLength = 0;
    if (!readU64(bundle, &at, &entry.offset) || !readU64(bundle, &at, &entry.size) ||
        !readU64(bundle, &at, &idLength) || idLength > bundle.size() - at) {
      return invalidArgument("offload bundle: entry " + std::to_string(i) +
                             "'s header is truncated");
    }
    entry.id.assign(reinterpret_cast<const char*>(bundle.data() + at), idLength);
    at += idLength;
    if (entry.offset > bundle.size() || entry.size > bundle.size() - entry.offset) {
      return invalidArgument("offload bundle: entry " + entry.id + " lies outside the bundle");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<std::string> offloadBundleGpuTargets(std::span<const uint8_t> bundle) {
  std::vector<std::string> targets;
  Result<std::vector<OffloadBundleEntry>> entries = readOffloadBundle(bundle);
  if (!entries.isOk()) return targets;
  for (const OffloadBundleEntry& entry : entries.value()) {
    // "hipv4-amdgcn-amd-amdhsa--gfx90a[:sramecc+:xnack-]": the target follows the last "--".
    size_t dashes = entry.id.rfind("--");
    if (entry.id.find("amdgcn") == std::string::npos || dashes == std::string::npos) continue;
    targets.push_back(entry.id.substr(dashes + 2));
  }
  return targets;
}

}  // namespace hc::device
