// Bad submission entries from a raw client: each is refused with a completion whose status and
// text name the problem, and the daemon keeps serving.
#include <gtest/gtest.h>

#include <string>

#include "common/ipc/frames.h"
#include "tests/integration/bad_entry_fixture.h"

namespace hc::integ {
namespace {

// The baseline that makes the refusals below meaningful: the same client's valid entry works.
TEST_F(BadInputEntryTest, ValidAllreduceSucceeds) {
  auto* in = reinterpret_cast<int32_t*>(client_->segment() + a_.offset);
  auto* out = reinterpret_cast<int32_t*>(client_->segment() + b_.offset);
  for (int i = 0; i < 64; ++i) {
    in[i] = i - 20;
    out[i] = 0;
  }
  auto c = client_->call(allreduce(64, a_.offset, b_.offset));
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_EQ(c->status, 0) << completionText(*c);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], i - 20) << "element " << i;
}

TEST_F(BadInputEntryTest, UnknownCommHandleIsNotFound) {
  auto e = allreduce(16, a_.offset, b_.offset);
  e.commHandle = comm_ + 1000;
  expectRefused(e, Code::NotFound, "unknown communicator");
}

TEST_F(BadInputEntryTest, BufferOutsideAnyAllocationIsRefused) {
  const uint64_t aEnd = a_.offset + a_.bytes;
  const uint64_t bEnd = b_.offset + b_.bytes;
  const uint64_t unallocated = (aEnd > bEnd ? aEnd : bEnd) + (1 << 20);
  const uint64_t sixteen = 16 * sizeof(int32_t);
  struct Where {
    const char* what;
    uint64_t offset;
    uint64_t count;
  };
  const Where cases[] = {
      {"segment header", 0, 16},
      {"ring area", client_->welcome().submitOffset, 16},
      {"unallocated heap", unallocated, 16},
      {"far past the segment", 1ull << 62, 16},
      {"straddles an allocation's end", aEnd - sixteen / 2, 16},
      {"count larger than the allocation", a_.offset, a_.bytes / sizeof(int32_t) + 1},
      {"offset + bytes wraps", ~0ull - 4095, 16 << 10},
  };
  for (const Where& w : cases) {
    SCOPED_TRACE(w.what);
    // The bad reference as the send buffer, then as the receive buffer.
    expectRefused(allreduce(w.count, w.offset, b_.offset), Code::InvalidArgument,
                  "not inside an allocation");
    expectRefused(allreduce(w.count, a_.offset, w.offset), Code::InvalidArgument,
                  "not inside an allocation");
  }
}

TEST_F(BadInputEntryTest, UnsupportedDtypeIsRefused) {
  for (uint8_t dtype : {uint8_t{12}, uint8_t{99}, uint8_t{255}}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    auto e = allreduce(16, a_.offset, b_.offset);
    e.dtype = dtype;
    expectRefused(e, Code::InvalidArgument, "dtype");
    auto bcast = makeEntry(OpType::Broadcast, comm_, dtype, 0, 16, a_.offset, b_.offset, 0);
    expectRefused(bcast, Code::InvalidArgument, "dtype");
  }
}

TEST_F(BadInputEntryTest, UnknownOperatorIsRefused) {
  for (uint8_t redop : {uint8_t{6}, uint8_t{17}, uint8_t{255}}) {
    for (OpType op : {OpType::AllReduce, OpType::Reduce, OpType::ReduceScatter}) {
      SCOPED_TRACE("redop " + std::to_string(redop) + " op " + std::to_string(int(op)));
      auto e = makeEntry(op, comm_, kInt32, redop, 16, a_.offset, b_.offset, 0);
      expectRefused(e, Code::InvalidArgument, "operator");
    }
  }
}

TEST_F(BadInputEntryTest, CountWhoseByteSizeWrapsIsRefused) {
  // 2^61 float64 elements are 2^64 bytes: exactly 0 after wrapping.
  for (uint64_t count : {1ull << 61, (1ull << 61) + 1, ~0ull}) {
    SCOPED_TRACE("count " + std::to_string(count));
    auto e = makeEntry(OpType::AllReduce, comm_, kFloat64, kSum, count, a_.offset, b_.offset);
    expectRefused(e, Code::InvalidArgument, "");
    auto g = makeEntry(OpType::AllGather, comm_, kFloat64, 0, count, a_.offset, b_.offset);
    expectRefused(g, Code::InvalidArgument, "");
  }
}

TEST_F(BadInputEntryTest, UnknownOperationIsRefused) {
  for (uint8_t op : {uint8_t{0}, ipc::kNumOpTypes, uint8_t{200}}) {
    SCOPED_TRACE("op " + std::to_string(op));
    auto e = allreduce(16, a_.offset, b_.offset);
    e.op = op;
    expectRefused(e, Code::InvalidArgument, "");
  }
}

// A tail more than a ring ahead of the head cannot come from a correct client: the daemon drops
// that client (Error frame, then close) and serves the others.
TEST_F(BadInputEntryTest, CorruptSubmissionRingClosesTheConnection) {
  auto* header = reinterpret_cast<ipc::SegmentHeader*>(client_->segment());
  header->submitTail.store(header->submitHead.load() + 100000);
  client_->ringDaemon();
  auto reply = client_->receive();
  ASSERT_TRUE(reply.isOk()) << "no Error frame: " << reply.status().toString();
  auto type = ipc::validateFrame(reply->bytes, reply->fds.size());
  ASSERT_TRUE(type.isOk()) << type.status().toString();
  ASSERT_EQ(*type, ipc::FrameType::Error);
  EXPECT_TRUE(client_->waitClosed());
}

TEST_F(BadInputEntryTest, CommInitWithBadRankOrSizeIsRefused) {
  const std::pair<int32_t, int32_t> cases[] = {{0, 0}, {-1, 0}, {-5, -1}, {2, 2}, {2, -1}, {3, 7}};
  for (auto [nranks, rank] : cases) {
    SCOPED_TRACE("nranks " + std::to_string(nranks) + " rank " + std::to_string(rank));
    auto c = client_->commInit(nranks, rank);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->status, static_cast<int32_t>(Code::InvalidArgument)) << completionText(*c);
    EXPECT_FALSE(completionText(*c).empty());
  }
}

}  // namespace
}  // namespace hc::integ
