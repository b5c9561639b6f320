// The code-object bundle embedded in hc_device_hip: present, a clang offload bundle, one AMD GPU
// code object per HC_HIP_ARCHS target, each an AMDGPU ELF that defines every reduction kernel the
// launch ABI names. And the bundle reader rejects what is not a bundle.
#include "daemon/device/hip/hip_kernel_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/device/kernels/reduce_args.h"

#ifndef HC_TEST_HIP_ARCHS
#error "the build passes HC_TEST_HIP_ARCHS, the HC_HIP_ARCHS the bundle was built for"
#endif

namespace hc::device {
namespace {

constexpr std::string_view kMagic =
    "__CLANG_OFFLOAD_BUNDLE__";              // spelled out, not kOffloadBundleMagic
constexpr uint16_t kElfMachineAmdgpu = 224;  // EM_AMDGPU

std::vector<std::string> configuredArchs() {
  std::vector<std::string> archs;
  std::stringstream list(HC_TEST_HIP_ARCHS);
  std::string arch;
  while (std::getline(list, arch, ',')) {
    if (!arch.empty()) archs.push_back(arch);
  }
  return archs;
}

bool contains(std::span<const uint8_t> bytes, std::string_view needle) {
  auto begin = reinterpret_cast<const char*>(bytes.data());
  return std::string_view(begin, bytes.size()).find(needle) != std::string_view::npos;
}

TEST(HipKernelImageTest, EmbeddedBundleStartsWithMagic) {
  std::span<const uint8_t> bundle = reduceKernelBundle();
  ASSERT_GT(bundle.size(), kMagic.size());
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(bundle.data()), kMagic.size()), kMagic);
}

TEST(HipKernelImageTest, EmbeddedBundleHasEveryConfiguredTarget) {
  std::vector<std::string> targets = offloadBundleGpuTargets(reduceKernelBundle());
  std::vector<std::string> archs = configuredArchs();
  ASSERT_FALSE(archs.empty());
  for (const std::string& arch : archs) {
    bool found = std::any_of(targets.begin(), targets.end(),
                             [&](const std::string& t) { return t.rfind(arch, 0) == 0; });
    EXPECT_TRUE(found) << arch << " is not in the bundle";
  }
  EXPECT_EQ(targets.size(), archs.size());
}

// The default build's targets, spelled out so that a changed default is a visible decision.
TEST(HipKernelImageTest, DefaultBuildListsGfx90aAndGfx940) {
  if (std::string_view(HC_TEST_HIP_ARCHS) != "gfx90a,gfx940") {
    GTEST_SKIP() << "HC_HIP_ARCHS is " << HC_TEST_HIP_ARCHS;
  }
  Result<std::vector<OffloadBundleEntry>> entries = readOffloadBundle(reduceKernelBundle());
  ASSERT_TRUE(entries.isOk()) << entries.status().toString();
  std::vector<std::string> ids;
  for (const OffloadBundleEntry& e : entries.value()) ids.push_back(e.id);
  auto has = [&](std::string_view gfx) {
    return std::any_of(ids.begin(), ids.end(), [&](const std::string& id) {
      return id.find("amdgcn-amd-amdhsa") != std::string::npos && id.find(gfx) != std::string::npos;
    });
  };
  EXPECT_TRUE(has("gfx90a"));
  EXPECT_TRUE(has("gfx940"));
}

TEST(HipKernelImageTest, EachGpuEntryIsAnAmdgpuElfWithEveryKernel) {
  std::span<const uint8_t> bundle = reduceKernelBundle();
  Result<std::vector<OffloadBundleEntry>> entries = readOffloadBundle(bundle);
  ASSERT_TRUE(entries.isOk()) << entries.status().toString();
  size_t gpuEntries = 0;
  for (const OffloadBundleEntry& entry : entries.value()) {
    if (entry.id.find("amdgcn") == std::string::npos) continue;
    ++gpuEntries;
    std::span<const uint8_t> elf = bundle.subspan(entry.offset, entry.size);
    ASSERT_GE(elf.size(), 20u) << entry.id;
    EXPECT_EQ(std::memcmp(elf.data(),
                          "\x7f"
                          "ELF",
                          4),
              0)
        << entry.id;
    uint16_t machine = static_cast<uint16_t>(elf[18] | (elf[19] << 8));
    EXPECT_EQ(machine, kElfMachineAmdgpu) << entry.id;
    for (const char* name : kernels::kReduceKernelNames) {
      // The kernel descriptor symbol "<name>.kd" exists only for a defined kernel.
      EXPECT_TRUE(contains(elf, std::string(name) + ".kd")) << entry.id << " lacks " << name;
    }
  }
  EXPECT_EQ(gpuEntries, configuredArchs().size());
}

TEST(HipKernelImageTest, ReaderRejectsWhatIsNotABundle) {
  std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  EXPECT_EQ(readOffloadBundle(elf).status().code(), Code::InvalidArgument);
  EXPECT_TRUE(offloadBundleGpuTargets(elf).empty());

  std::vector<uint8_t> magicOnly(kMagic.begin(), kMagic.end());
  EXPECT_EQ(readOffloadBundle(magicOnly).status().code(), Code::InvalidArgument);
}

// A bundle whose entry claims bytes past its end is refused, not read out of bounds.
TEST(HipKernelImageTest, ReaderRejectsEntryOutsideBundle) {
  std::span<const uint8_t> real = reduceKernelBundle();
  Result<std::vector<OffloadBundleEntry>> entries = readOffloadBundle(real);
  ASSERT_TRUE(entries.isOk());
  // Cut the bundle just before its last code object ends.
  const OffloadBundleEntry& last = *std::max_element(
      entries.value().begin(), entries.value().end(),
      [](const auto& a, const auto& b) { return a.offset + a.size < b.offset + b.size; });
  std::vector<uint8_t> cut(real.begin(), real.begin() + (last.offset + last.size - 1));
  Result<std::vector<OffloadBundleEntry>> parsed = readOffloadBundle(cut);
  ASSERT_FALSE(parsed.isOk());
  EXPECT_EQ(parsed.status().code(), Code::InvalidArgument);
  EXPECT_NE(parsed.status().message().find("outside the bundle"), std::string::npos)
      << parsed.status().message();

  // And a header cut inside an entry's id.
  std::vector<uint8_t> header(real.begin(), real.begin() + 40);
  EXPECT_EQ(readOffloadBundle(header).status().code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc::device
