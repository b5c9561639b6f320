// The memory-bound floor under one hc-perf row, as arithmetic: how many bytes the daemon's
// one-pass local step must read and write for an operation (daemon/coll/local_plan.cc and
// reduce.h: every input read once, the result or copy written once to every output, an output
// equal to its source skipped), which sizes are large enough for that floor to mean anything (at
// least 4x the last-level cache, so the bytes come from memory, not cache), and the bound itself,
// max(read / B_read, written / B_write): reads and writes share one memory system, so an operation
// takes at least as long as either alone at the best rate this machine reaches.
#pragma once

#include <cstddef>
#include <string>

#include "bench/perf_cases.h"

namespace hc::bench {

// The bytes one operation must move through memory, at least, in the daemon's one pass.
struct OpBytes {
  double read = 0;
  double written = 0;
};

// For one row (a local, single-daemon run of nranks ranks, host buffers).
OpBytes onePassBytes(const Case& c, int nranks, bool inPlace);

// The best 2-thread rates measured on this machine, in bytes per second.
struct StreamRates {
  double readBps = 0;
  double writeBps = 0;
};

// Each rate the higher of a and b: a bound must use the best the machine did.
StreamRates bestOf(const StreamRates& a, const StreamRates& b);

// max(read / B_read, written / B_write) in seconds; 0 when a rate is unknown.
double boundSeconds(const OpBytes& bytes, const StreamRates& rates);

// The size of the cache nearest memory, and where that figure came from.
struct LastLevelCache {
  size_t bytes = 0;    // 0: unknown
  std::string source;  // for the preamble: "sysfs L3", "cpuid (sysconf) L3", "--llc", ...
};

// Reads cpuDir/cache/index*/{level,type,size} (cpuDir: /sys/devices/system/cpu/cpu0 on a real
// system): the level-3 data or unified cache, else the largest level found. Falls back to
// sysconf(_SC_LEVEL3_CACHE_SIZE), then _SC_LEVEL2_CACHE_SIZE (glibc's reading of cpuid, which a
// hypervisor may fill with the whole chip's cache), and says which one it used.
LastLevelCache lastLevelCache(const std::string& cpuDir);

// "32768K", "1024 KB", "32M", "512": the sizes sysfs writes. 0 when unreadable.
size_t parseCacheSize(const std::string& text);

// Rows whose size column is below this many last-level caches get no bound.
constexpr size_t kBoundMinCaches = 4;
bool rowGetsBound(size_t rowBytes, size_t llcBytes);

// hc-perf's fraction of the bound: bound time / measured time. Above 1 the row beat a floor the
// machine cannot go under, so one of the two measurements is wrong.
struct BoundVerdict {
  double fraction = 0;
  bool measurementError = false;
};
BoundVerdict judgeRow(double boundSec, double measuredSec);

}  // namespace hc::bench
