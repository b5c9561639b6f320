// The environment: NCCL_DEBUG (VERSION prints a banner naming hetero-comm; WARN and above log
// each failure's text) and the banner itself.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shim/src/shim.h"

namespace hc::shim {
namespace {

DebugLevel parseLevel(const char* v) {
  if (v == nullptr) return DebugLevel::None;
  if (strcasecmp(v, "VERSION") == 0) return DebugLevel::Version;
  if (strcasecmp(v, "WARN") == 0) return DebugLevel::Warn;
  if (strcasecmp(v, "INFO") == 0) return DebugLevel::Info;
  if (strcasecmp(v, "TRACE") == 0) return DebugLevel::Trace;
  return DebugLevel::None;
}

// -1: not read yet.
std::atomic<int> gLevel{-1};
std::atomic<bool> gBannerPrinted{false};

}  // namespace

DebugLevel debugLevel() {
  int level = gLevel.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(parseLevel(std::getenv("NCCL_DEBUG")));
    gLevel.store(level, std::memory_order_relaxed);
  }
  return static_cast<DebugLevel>(level);
}

void rereadDebugEnv() {
  gLevel.store(-1, std::memory_order_relaxed);
  gBannerPrinted.store(false, std::memory_order_relaxed);
}

void printBannerOnce() {
  if (debugLevel() < DebugLevel::Version || gBannerPrinted.exchange(true)) return;
  int hcVersion = 0;
  (void)hc_get_version(&hcVersion);
  const char* socket = std::getenv("HC_SOCKET");
  std::fprintf(stderr,
               "NCCL version %d.%d.%d+hetero-comm %d.%d.%d (%s over libhcclient; daemon "
               "hetero-commd at %s)\n",
               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, hcVersion / 10000, hcVersion / 100 % 100,
               hcVersion % 100, libraryName(), socket != nullptr ? socket : "the default socket");
}

}  // namespace hc::shim

extern "C" void ncclResetDebugInit(void) { hc::shim::rereadDebugEnv(); }

HC_NCCL_TWIN(ncclResetDebugInit)
