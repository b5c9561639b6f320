// The shim's rccl/rccl.h against RCCL's values and layouts: NCCL's enums, ncclConfig_t without
// graphStreamOrdering, ncclResult_t without ncclTimeout, hipStream_t.
#include <rccl/rccl.h>

#include <cstddef>

#include <gtest/gtest.h>

namespace {

TEST(RcclHeaderTest, ResultsEndAtEight) {
  EXPECT_EQ(ncclInProgress, 7);
  EXPECT_EQ(ncclNumResults, 8);
}

TEST(RcclHeaderTest, ConfigHasNoGraphStreamOrdering) {
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, maxP2pPeers), 88u);
  EXPECT_EQ(sizeof(ncclConfig_t), 96u);  // 92 bytes of fields, padded to 8
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.maxP2pPeers, INT_MIN);
}

TEST(RcclHeaderTest, SameVersionAndEnumsAsNccl) {
  EXPECT_EQ(NCCL_VERSION_CODE, 23007);
  EXPECT_EQ(ncclBfloat16, 9);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_EQ(sizeof(hipStream_t), sizeof(void*));
  EXPECT_EQ(RCCL_ALLTOALLV, 1);
}

}  // namespace
