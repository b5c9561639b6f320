// The vocabulary of operations, dtypes and reduction operators (common/vocabulary.h): the checks
// of a trust boundary, sizes and names, and what each operation takes. Values are written out
// here on purpose: they are the NCCL ABI's and the wire's, not whatever the header says.
#include "common/vocabulary.h"

#include <gtest/gtest.h>

#include <string>

namespace hc {
namespace {

bool mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(VocabularyTest, AcceptsEveryDtypeWithEveryOperator) {
  for (int d = 0; d < 12; ++d) {
    ASSERT_TRUE(checkedDtype(d).isOk()) << d;
    EXPECT_EQ(static_cast<int>(*checkedDtype(d)), d);
    for (int op = 0; op < 6; ++op) {
      EXPECT_TRUE(checkReduction(d, op).isOk()) << d << " " << op;
    }
  }
}

TEST(VocabularyTest, RejectsUnknownValuesByName) {
  for (int dtype : {12, 99, 255, -1}) {
    for (Status s : {checkReduction(dtype, 0), checkedDtype(dtype).status()}) {
      EXPECT_EQ(s.code(), Code::InvalidArgument);
      EXPECT_TRUE(mentions(s, "dtype " + std::to_string(dtype))) << s.message();
    }
    EXPECT_FALSE(dtypeFrom(dtype).has_value());
  }
  for (int op : {6, 17, 255, -3}) {
    Status s = checkReduction(7, op);
    EXPECT_EQ(s.code(), Code::InvalidArgument);
    EXPECT_TRUE(mentions(s, "operator " + std::to_string(op))) << s.message();
    EXPECT_FALSE(checkedRedOp(op).isOk());
  }
  for (int op : {0, 17, 18, 255}) {
    Status s = checkedOpType(op).status();
    EXPECT_EQ(s.code(), Code::InvalidArgument);
    EXPECT_TRUE(mentions(s, "unknown operation " + std::to_string(op))) << s.message();
  }
  for (int op = 1; op < 17; ++op) EXPECT_TRUE(checkedOpType(op).isOk()) << op;
}

TEST(VocabularyTest, SizesAndNames) {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const char* names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",    "uint64",
                         "float16", "float32", "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
  const char* ncclTests[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                             "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int d = 0; d < 12; ++d) {
    const Dtype dtype = *dtypeFrom(d);
    EXPECT_EQ(dtypeSize(dtype), sizes[d]) << d;
    EXPECT_STREQ(dtypeName(dtype), names[d]);
    EXPECT_STREQ(ncclTestsDtypeName(dtype), ncclTests[d]);
    EXPECT_EQ(dtypeNamed(names[d]), dtype) << names[d];
    EXPECT_EQ(dtypeNamed(ncclTests[d]), dtype) << ncclTests[d];
  }
  EXPECT_EQ(dtypeNamed("bf16"), Dtype::Bfloat16);
  for (const char* bad : {"", "float128", "Float32", "all", "f8"}) {
    EXPECT_FALSE(dtypeNamed(bad).has_value()) << bad;
  }
  const char* ops[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  for (int op = 0; op < 6; ++op) EXPECT_STREQ(redOpName(*redOpFrom(op)), ops[op]);
  EXPECT_STREQ(opName(OpType::ReduceScatter), "reduce_scatter");
  EXPECT_STREQ(opName(OpType::AllToAll), "alltoall");
}

TEST(VocabularyTest, NarrowFloatsAreTheSixteenAndEightBitOnes) {
  for (int d = 0; d < 12; ++d) {
    const bool narrow = d == 6 || d == 9 || d == 10 || d == 11;
    EXPECT_EQ(isNarrowFloat(*dtypeFrom(d)), narrow) << d;
  }
}

TEST(VocabularyTest, WhatEachOperationTakes) {
  // code: reduction, root, peer, moves data
  struct Row {
    int code;
    bool reduction, root, peer, data;
  };
  const Row rows[] = {
      {1, false, false, false, false}, {2, false, false, false, false},
      {3, true, false, false, true},   {4, false, true, false, true},
      {5, true, true, false, true},    {6, false, false, false, true},
      {7, true, false, false, true},   {8, false, false, false, false},
      {9, false, false, false, true},  {10, false, true, false, true},
      {11, false, true, false, true},  {12, false, false, true, true},
      {13, false, false, true, true},  {14, false, false, false, false},
  };
  for (const Row& r : rows) {
    const OpType op = *opTypeFrom(r.code);
    SCOPED_TRACE(opName(op));
    EXPECT_EQ(isReduction(op), r.reduction);
    EXPECT_EQ(hasRoot(op), r.root);
    EXPECT_EQ(isPointToPoint(op), r.peer);
    EXPECT_EQ(movesData(op), r.data);
  }
}

TEST(VocabularyTest, ByteCountsOverflowClearly) {
  EXPECT_EQ(bytesOf(10, Dtype::Float32), 40u);
  EXPECT_EQ(bytesOf(10, Dtype::Float64, 3), 240u);
  EXPECT_EQ(bytesOf(0, Dtype::Int64, 1000), 0u);
  EXPECT_FALSE(bytesOf(~0ull / 2, Dtype::Int32).has_value());
  EXPECT_FALSE(bytesOf(~0ull / 8, Dtype::Int32, 3).has_value());
}

}  // namespace
}  // namespace hc
