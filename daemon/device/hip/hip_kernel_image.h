// The reduction kernels' code-object bundle, compiled by hipcc from daemon/device/kernels at
// build time (reduce_hip.cc: one code object per HC_HIP_ARCHS target, packed into one clang
// offload bundle) and embedded in hc_device_hip (embed_hip_bundle.S.in), so the daemon carries
// its kernels with it and loads them with hipModuleLoadData when a GPU is present; the runtime
// picks the code object built for the device.
// Depends on hc_common only; safe to include anywhere (no HIP headers). Tests read the bundle on
// machines without ROCm.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hc::device {

// Every clang offload bundle starts with these 24 bytes.
inline constexpr std::string_view kOffloadBundleMagic = "__CLANG_OFFLOAD_BUNDLE__";

// The embedded bundle, whole, exactly as hipcc --genco wrote it. Valid for the life of the
// process.
std::span<const uint8_t> reduceKernelBundle();

// One entry of a clang offload bundle: a code object and the target it was built for.
struct OffloadBundleEntry {
  // "hipv4-amdgcn-amd-amdhsa--gfx90a"; hipcc adds an empty "host-x86_64-unknown-linux" entry.
  std::string id;
  uint64_t offset = 0;  // of the code object, from the start of the bundle
  uint64_t size = 0;
};

// Reads a bundle's header: the magic, a little-endian uint64 entry count, then per entry uint64
// offset, uint64 size, uint64 id length and the id. InvalidArgument when the magic is missing,
// the header is cut short, or an entry lies outside the bundle.
[[nodiscard]] Result<std::vector<OffloadBundleEntry>> readOffloadBundle(
    std::span<const uint8_t> bundle);

// The GPU targets of a bundle's entries ("gfx90a", "gfx940"), for logs and fallback reasons;
// empty when the bundle does not parse.
std::vector<std::string> offloadBundleGpuTargets(std::span<const uint8_t> bundle);

}  // namespace hc::device
