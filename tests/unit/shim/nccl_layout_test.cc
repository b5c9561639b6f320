// The shim's nccl.h against NCCL 2.30.7's values and layouts, written here independently of the
// header (from the ABI facts: enum values, struct offsets on LP64, version macros).
#include <nccl.h>

#include <cstddef>

#include <gtest/gtest.h>

namespace {

TEST(NcclHeaderTest, VersionMacrosAre2_30_7) {
  EXPECT_EQ(NCCL_MAJOR, 2);
  EXPECT_EQ(NCCL_MINOR, 30);
  EXPECT_EQ(NCCL_PATCH, 7);
  EXPECT_EQ(NCCL_VERSION_CODE, 23007);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);  // two-digit minor before 2.9
  EXPECT_EQ(NCCL_VERSION(2, 18, 1), 21801);
}

TEST(NcclHeaderTest, ResultValues) {
  EXPECT_EQ(ncclSuccess, 0);
  EXPECT_EQ(ncclUnhandledCudaError, 1);
  EXPECT_EQ(ncclSystemError, 2);
  EXPECT_EQ(ncclInternalError, 3);
  EXPECT_EQ(ncclInvalidArgument, 4);
  EXPECT_EQ(ncclInvalidUsage, 5);
  EXPECT_EQ(ncclRemoteError, 6);
  EXPECT_EQ(ncclInProgress, 7);
  EXPECT_EQ(ncclTimeout, 8);
  EXPECT_EQ(ncclNumResults, 9);
}

TEST(NcclHeaderTest, DataTypeAndOpValues) {
  const int types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                       ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                       ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(types[i], i);
  EXPECT_EQ(ncclNumTypes, 12);
  EXPECT_EQ(ncclChar, 0);
  EXPECT_EQ(ncclInt, 2);
  EXPECT_EQ(ncclHalf, 6);
  EXPECT_EQ(ncclFloat, 7);
  EXPECT_EQ(ncclDouble, 8);
  EXPECT_EQ(ncclSum, 0);
  EXPECT_EQ(ncclProd, 1);
  EXPECT_EQ(ncclMax, 2);
  EXPECT_EQ(ncclMin, 3);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ(static_cast<long long>(ncclMaxRedOp), 0x7fffffffLL);
  EXPECT_EQ(sizeof(ncclRedOp_t), 4u);
  EXPECT_EQ(ncclScalarDevice, 0);
  EXPECT_EQ(ncclScalarHostImmediate, 1);
  EXPECT_EQ(ncclStatGpuMemTotal, 3);
}

TEST(NcclHeaderTest, Constants) {
  EXPECT_EQ(NCCL_UNIQUE_ID_BYTES, 128);
  EXPECT_EQ(NCCL_SPLIT_NOCOLOR, -1);
  EXPECT_EQ(NCCL_API_MAGIC, 0xcafebeefu);
  EXPECT_EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EXPECT_EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
  EXPECT_EQ(NCCL_UNDEF_FLOAT, -1.0f);
}

TEST(NcclHeaderTest, UniqueIdIs128BytesByValue) {
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_EQ(alignof(ncclUniqueId), 1u);
}

TEST(NcclHeaderTest, ConfigLayout) {
  EXPECT_EQ(offsetof(ncclConfig_t, size), 0u);
  EXPECT_EQ(offsetof(ncclConfig_t, magic), 8u);
  EXPECT_EQ(offsetof(ncclConfig_t, version), 12u);
  EXPECT_EQ(offsetof(ncclConfig_t, blocking), 16u);
  EXPECT_EQ(offsetof(ncclConfig_t, maxCTAs), 28u);
  EXPECT_EQ(offsetof(ncclConfig_t, netName), 32u);
  EXPECT_EQ(offsetof(ncclConfig_t, splitShare), 40u);
  EXPECT_EQ(offsetof(ncclConfig_t, trafficClass), 44u);
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, collnetEnable), 56u);
  EXPECT_EQ(offsetof(ncclConfig_t, maxP2pPeers), 88u);
  EXPECT_EQ(offsetof(ncclConfig_t, graphStreamOrdering), 92u);
  EXPECT_EQ(sizeof(ncclConfig_t), 96u);
}

TEST(NcclHeaderTest, ConfigInitializer) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, 96u);
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 23007u);
  EXPECT_EQ(c.blocking, INT_MIN);
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
  EXPECT_EQ(c.maxP2pPeers, INT_MIN);
  EXPECT_EQ(c.graphStreamOrdering, INT_MIN);
}

TEST(NcclHeaderTest, SimInfoAndSignalDesc) {
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(offsetof(ncclSimInfo_t, estimatedTime), 16u);
  EXPECT_EQ(sizeof(ncclWaitSignalDesc_t), 16u);
  EXPECT_EQ(offsetof(ncclWaitSignalDesc_t, ctx), 12u);
}

TEST(NcclHeaderTest, StreamIsTheCudaRuntimesPointer) {
  EXPECT_EQ(sizeof(cudaStream_t), sizeof(void*));
}

}  // namespace
