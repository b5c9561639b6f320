// hc-perf's bound without a daemon: the one-pass bytes per operation, the bound's arithmetic, which
// rows get one, the last-level cache read from a fake sysfs folder, the daemon's CPU time read
// from /proc/<pid>/stat text, and the table's verdict on a row that beats its bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bench/bound_model.h"
#include "bench/daemon_cpu.h"
#include "bench/perf_table.h"
#include "tests/support/temp_dir.h"

namespace hc::bench {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

Case floatCase(OpKind op, size_t bytes, int nranks) {
  Options opts;
  opts.nranks = nranks;
  opts.minBytes = opts.maxBytes = bytes;
  opts.ops = {op};
  std::vector<Case> cases = buildCases(opts);
  EXPECT_EQ(cases.size(), 1u);
  return cases.front();
}

TEST(OnePassBytesTest, AllreduceReadsEveryInputAndWritesEveryOutputOnce) {
  const Case c = floatCase(OpKind::AllReduce, 256 * kMiB, 2);
  for (bool inPlace : {false, true}) {
    const OpBytes b = onePassBytes(c, 2, inPlace);
    EXPECT_DOUBLE_EQ(b.read, 2.0 * 256 * kMiB);
    EXPECT_DOUBLE_EQ(b.written, 2.0 * 256 * kMiB);
  }
}

TEST(OnePassBytesTest, InPlaceCopiesSkipTheOutputThatIsTheSource) {
  const Case bcast = floatCase(OpKind::Broadcast, 64 * kMiB, 4);
  EXPECT_DOUBLE_EQ(onePassBytes(bcast, 4, false).written, 4.0 * 64 * kMiB);
  EXPECT_DOUBLE_EQ(onePassBytes(bcast, 4, true).written, 3.0 * 64 * kMiB);
  EXPECT_DOUBLE_EQ(onePassBytes(bcast, 4, true).read, 64.0 * kMiB);
  // Allgather's size column is the gathered total: each rank sends a quarter of it.
  const Case gather = floatCase(OpKind::AllGather, 64 * kMiB, 4);
  EXPECT_DOUBLE_EQ(onePassBytes(gather, 4, false).read, 64.0 * kMiB);
  EXPECT_DOUBLE_EQ(onePassBytes(gather, 4, false).written, 4.0 * 64 * kMiB);
  EXPECT_DOUBLE_EQ(onePassBytes(gather, 4, true).written, 3.0 * 64 * kMiB);
  const Case reduce = floatCase(OpKind::Reduce, 64 * kMiB, 4);
  EXPECT_DOUBLE_EQ(onePassBytes(reduce, 4, false).read, 4.0 * 64 * kMiB);
  EXPECT_DOUBLE_EQ(onePassBytes(reduce, 4, false).written, 64.0 * kMiB);
}

TEST(BoundTest, IsTheSlowerOfReadingAndWritingAtTheBestRates) {
  const OpBytes bytes{4e9, 2e9};
  // Reads take 4e9 / 40e9 = 0.1 s, writes 2e9 / 10e9 = 0.2 s: the writes bound.
  EXPECT_DOUBLE_EQ(boundSeconds(bytes, {40e9, 10e9}), 0.2);
  EXPECT_DOUBLE_EQ(boundSeconds(bytes, {20e9, 40e9}), 0.2);  // now the reads
  EXPECT_EQ(boundSeconds(bytes, {0, 10e9}), 0.0);            // unknown rate: no bound
  const StreamRates best = bestOf({40e9, 10e9}, {30e9, 12e9});
  EXPECT_DOUBLE_EQ(best.readBps, 40e9);
  EXPECT_DOUBLE_EQ(best.writeBps, 12e9);
}

TEST(BoundTest, OnlyRowsOfAtLeastFourCachesGetOne) {
  EXPECT_FALSE(rowGetsBound(64 * kMiB, 32 * kMiB));
  EXPECT_FALSE(rowGetsBound(128 * kMiB - 1, 32 * kMiB));
  EXPECT_TRUE(rowGetsBound(128 * kMiB, 32 * kMiB));
  EXPECT_FALSE(rowGetsBound(size_t{1} << 40, 0));  // unknown cache: no bound
}

TEST(BoundTest, ARowFasterThanItsBoundIsAMeasurementError) {
  EXPECT_FALSE(judgeRow(0.018, 0.020).measurementError);
  EXPECT_DOUBLE_EQ(judgeRow(0.018, 0.020).fraction, 0.9);
  EXPECT_TRUE(judgeRow(0.021, 0.020).measurementError);
  EXPECT_FALSE(judgeRow(0.0, 0.020).measurementError);  // no bound
}

TEST(CacheSizeTest, ParsesTheSizesSysfsWrites) {
  EXPECT_EQ(parseCacheSize("32768K"), 32 * kMiB);
  EXPECT_EQ(parseCacheSize("1024 KB"), kMiB);
  EXPECT_EQ(parseCacheSize("32M\n"), 32 * kMiB);
  EXPECT_EQ(parseCacheSize("512"), 512u);
  EXPECT_EQ(parseCacheSize(""), 0u);
  EXPECT_EQ(parseCacheSize("big"), 0u);
}

TEST(CacheSizeTest, TakesLevelThreeFromSysfs) {
  test::TempDir cpu("perf-bound-cpu");
  auto cache = [&](int index, const char* level, const char* type, const char* size) {
    const std::string dir = "cache/index" + std::to_string(index) + "/";
    cpu.write(dir + "level", std::string(level) + "\n");
    cpu.write(dir + "type", std::string(type) + "\n");
    cpu.write(dir + "size", std::string(size) + "\n");
  };
  cache(0, "1", "Data", "48K");
  cache(1, "1", "Instruction", "32K");
  cache(2, "2", "Unified", "1024K");
  cache(3, "3", "Unified", "32768K");
  const LastLevelCache llc = lastLevelCache(cpu.path());
  EXPECT_EQ(llc.bytes, 32 * kMiB);
  EXPECT_NE(llc.source.find("sysfs L3"), std::string::npos) << llc.source;
}

TEST(CacheSizeTest, WithoutLevelThreeTakesTheLargestLevel) {
  test::TempDir cpu("perf-bound-cpu");
  cpu.write("cache/index0/level", "1\n");
  cpu.write("cache/index0/type", "Data\n");
  cpu.write("cache/index0/size", "64K\n");
  cpu.write("cache/index1/level", "2\n");
  cpu.write("cache/index1/type", "Unified\n");
  cpu.write("cache/index1/size", "2048K\n");
  const LastLevelCache llc = lastLevelCache(cpu.path());
  EXPECT_EQ(llc.bytes, 2 * kMiB);
  EXPECT_NE(llc.source.find("sysfs L2"), std::string::npos) << llc.source;
}

TEST(CacheSizeTest, WithoutSysfsFallsBackAndSaysSo) {
  test::TempDir cpu("perf-bound-cpu");  // no cache/ folder at all
  const LastLevelCache llc = lastLevelCache(cpu.path());
  EXPECT_NE(llc.source.find("has no sizes"), std::string::npos) << llc.source;
  if (llc.bytes > 0) {
    EXPECT_NE(llc.source.find("sysconf"), std::string::npos) << llc.source;
  }
}

TEST(DaemonCpuTest, ReadsUserAndSystemTicksAfterTheCommandName) {
  // A command name with a space and a ')' of its own; utime 250, stime 50 ticks.
  const std::string stat = "4242 (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20";
  EXPECT_DOUBLE_EQ(cpuSecondsFromStat(stat, 100), 3.0);
  EXPECT_LT(cpuSecondsFromStat("4242 (cut) S 1", 100), 0.0);
  EXPECT_LT(cpuSecondsFromStat("no name at all", 100), 0.0);
}

TEST(DaemonCpuTest, ReadsThisProcessClock) {
  EXPECT_GE(processCpuSeconds(::getpid()), 0.0);
  EXPECT_LT(processCpuSeconds(-1), 0.0);
}

// The table: one bounded allreduce row whose in-place time is under its bound is flagged, the
// out-of-place one is not, and the footer counts it.
TEST(PerfTableBoundTest, ARowAboveItsBoundIsFlaggedAndCounted) {
  Options opts;
  opts.nranks = 2;
  opts.iters = 10;
  opts.minBytes = opts.maxBytes = 256 * kMiB;
  std::vector<Case> cases = buildCases(opts);
  ASSERT_EQ(cases.size(), 1u);
  cases[0].measuredBound = true;
  BoundSetup setup;
  setup.bounds = true;
  setup.llc = {32 * kMiB, "test"};
  setup.streamBytes = 128 * kMiB;
  setup.noCpuReason = "test";
  // 512 MiB read and written per operation at 40 GB/s read, 20 GB/s write: 26.8 ms.
  RowRates rates;
  rates.before.best = {40e9, 20e9};
  rates.after.best = {30e9, 15e9};
  std::vector<CaseReport> reports(2);
  for (CaseReport& r : reports) {
    r.timeUs[0] = 40000;  // 67% of the bound
    r.timeUs[1] = 20000;  // faster than the bound: a measurement error
    r.daemonCpuSec[0] = r.daemonCpuSec[1] = -1;
  }
  reports[0].daemonCpuSec[1] = 0.5368709120;  // 0.2 CPU-s per GB over 10 x 256 MiB

  TablePrinter table(opts, setup);
  testing::internal::CaptureStdout();
  table.printRow(cases[0], reports, &rates);
  table.printFooter();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(table.aboveBound(), 1);
  EXPECT_NE(out.find("at 268435456 out-of-place: busbw 6.71 GB/s, daemon CPU-s/GB -, bound "
                     "26844 us"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("hc-perf 67% of the bound\n"), std::string::npos) << out;
  EXPECT_NE(out.find("daemon CPU-s/GB 0.200"), std::string::npos) << out;
  EXPECT_NE(out.find("hc-perf 134% of the bound ! measurement error"), std::string::npos) << out;
  EXPECT_NE(out.find("# ! above 100%"), std::string::npos) << out;
  EXPECT_NE(out.find("# Rows above their bound: 1"), std::string::npos) << out;
}

}  // namespace
}  // namespace hc::bench
