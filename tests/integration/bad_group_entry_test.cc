// Bad entries of the newer contract (point-to-point, groups, all-to-all, gather/scatter, split,
// entry flags) from a raw client: each is refused with a completion whose status and text name
// the problem, and the daemon keeps serving. Two raw clients in one thread form a two-rank
// communicator where a test needs disagreeing ranks.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/bad_entry_fixture.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

constexpr uint8_t kPreMulSum = static_cast<uint8_t>(RedOp::PreMulSum);

// Submits entries as one group and expects every one of them refused (InvalidArgument), at least
// one with a text containing textHas.
void expectGroupRefused(RawClient& client, const DaemonProcess& daemon,
                        std::vector<ipc::SubmitEntry> entries, const std::string& textHas) {
  auto done = client.callGroup(std::move(entries));
  ASSERT_TRUE(done.isOk()) << done.status().toString() << "\n" << daemon.logTail();
  bool named = false;
  for (const auto& c : *done) {
    EXPECT_EQ(c.status, static_cast<int32_t>(Code::InvalidArgument)) << completionText(c);
    named = named || completionText(c).find(textHas) != std::string::npos;
  }
  EXPECT_TRUE(named) << "no completion names the problem (\"" << textHas << "\")";
}

// The baseline for the transfer refusals below: a send to self with its receive in the same group
// (the first entry says another follows) copies the data.
TEST_F(BadInputEntryTest, SelfSendAndReceiveInOneGroupCopyTheData) {
  auto* in = reinterpret_cast<int32_t*>(client_->segment() + a_.offset);
  auto* out = reinterpret_cast<int32_t*>(client_->segment() + b_.offset);
  for (int i = 0; i < 64; ++i) {
    in[i] = 3 * i - 50;
    out[i] = 0;
  }
  auto done = client_->callGroup(
      {makeEntry(OpType::Send, comm_, kInt32, 0, 64, a_.offset, ipc::kNoBuffer, 0),
       makeEntry(OpType::Recv, comm_, kInt32, 0, 64, ipc::kNoBuffer, b_.offset, 0)});
  ASSERT_TRUE(done.isOk()) << done.status().toString() << "\n" << daemon_->logTail();
  for (const auto& c : *done) EXPECT_EQ(c.status, 0) << completionText(c);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], 3 * i - 50) << "element " << i;
}

TEST_F(BadInputEntryTest, UnknownEntryFlagsAreRefused) {
  for (uint8_t flags : {uint8_t{1u << 2}, uint8_t{1u << 7}, uint8_t{0xFC}}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    auto e = allreduce(16, a_.offset, b_.offset);
    e.flags = flags;
    expectRefused(e, Code::InvalidArgument, "flag");
  }
}

TEST_F(BadInputEntryTest, PeerOutOfRangeIsRefused) {
  for (int32_t peer : {1, -1, INT32_MAX, INT32_MIN}) {
    SCOPED_TRACE("peer " + std::to_string(peer));
    expectRefused(makeEntry(OpType::Send, comm_, kInt32, 0, 16, a_.offset, ipc::kNoBuffer, peer),
                  Code::InvalidArgument, "peer");
    expectRefused(makeEntry(OpType::Recv, comm_, kInt32, 0, 16, ipc::kNoBuffer, b_.offset, peer),
                  Code::InvalidArgument, "peer");
  }
}

// A send to self matches only a receive from self of the same group: alone it could never
// complete, so it is refused at once instead of hanging.
TEST_F(BadInputEntryTest, SendOrReceiveToSelfWithoutItsPartnerIsRefused) {
  expectRefused(makeEntry(OpType::Send, comm_, kInt32, 0, 16, a_.offset, ipc::kNoBuffer, 0),
                Code::InvalidArgument, "self");
  expectRefused(makeEntry(OpType::Recv, comm_, kInt32, 0, 16, ipc::kNoBuffer, b_.offset, 0),
                Code::InvalidArgument, "self");
  // Two sends to self in one group and no receive: the whole group is refused.
  auto send = makeEntry(OpType::Send, comm_, kInt32, 0, 16, a_.offset, ipc::kNoBuffer, 0);
  expectGroupRefused(*client_, *daemon_, {send, send}, "self");
}

TEST_F(BadInputEntryTest, GatherAndScatterRootOutOfRangeIsRefused) {
  for (int32_t root : {1, -1, INT32_MAX}) {
    SCOPED_TRACE("root " + std::to_string(root));
    for (OpType op : {OpType::Gather, OpType::Scatter}) {
      expectRefused(makeEntry(op, comm_, kInt32, 0, 16, a_.offset, b_.offset, root),
                    Code::InvalidArgument, "root");
    }
  }
}

TEST_F(BadInputEntryTest, AllToAllAndPointToPointCountsWhoseByteSizeWrapsAreRefused) {
  for (uint64_t count : {1ull << 61, (1ull << 61) + 1, ~0ull}) {
    SCOPED_TRACE("count " + std::to_string(count));
    expectRefused(makeEntry(OpType::AllToAll, comm_, kFloat64, 0, count, a_.offset, b_.offset),
                  Code::InvalidArgument, "");
    expectRefused(makeEntry(OpType::Gather, comm_, kFloat64, 0, count, a_.offset, b_.offset, 0),
                  Code::InvalidArgument, "");
    expectGroupRefused(
        *client_, *daemon_,
        {makeEntry(OpType::Send, comm_, kFloat64, 0, count, a_.offset, ipc::kNoBuffer, 0),
         makeEntry(OpType::Recv, comm_, kFloat64, 0, count, ipc::kNoBuffer, b_.offset, 0)},
        "");
  }
}

// PreMulSum with the scalar in the segment: read from the allocation when the op runs; an offset
// outside every allocation is refused.
TEST_F(BadInputEntryTest, ScalarInBufferIsReadFromTheSegmentAndMustLieInAnAllocation) {
  auto* in = reinterpret_cast<int32_t*>(client_->segment() + a_.offset);
  auto* out = reinterpret_cast<int32_t*>(client_->segment() + b_.offset);
  for (int i = 0; i < 16; ++i) in[i] = i - 4;
  const uint64_t scalarAt = a_.offset + kBufferBytes - 64;
  int32_t three = 3;
  std::memcpy(client_->segment() + scalarAt, &three, sizeof(three));
  auto ok = makeEntry(OpType::AllReduce, comm_, kInt32, kPreMulSum, 16, a_.offset, b_.offset);
  ok.flags = ipc::kEntryScalarInBuffer;
  ok.scalar = scalarAt;
  auto c = client_->call(ok);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_EQ(c->status, 0) << completionText(*c);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], 3 * (i - 4)) << "element " << i;

  const uint64_t outside[] = {0, client_->welcome().submitOffset, uint64_t{1} << 62,
                              ~uint64_t{0} - 2};
  for (uint64_t where : outside) {
    SCOPED_TRACE("scalar offset " + std::to_string(where));
    auto e = ok;
    e.scalar = where;
    expectRefused(e, Code::InvalidArgument, "");
  }
}

TEST_F(BadInputEntryTest, SplitWithANegativeColorOtherThanNoColorIsRefused) {
  for (int32_t color : {-2, INT32_MIN}) {
    SCOPED_TRACE("color " + std::to_string(color));
    auto e = makeEntry(OpType::CommSplit, comm_, 0, 0, 0, ipc::kNoBuffer, ipc::kNoBuffer);
    e.splitColor = color;
    e.splitKey = 0;
    expectRefused(e, Code::InvalidArgument, "color");
  }
}

// Outcome of one long group of count-0 allreduces on a one-rank communicator.
struct LongGroupOutcome {
  uint64_t ok = 0;
  uint64_t refused = 0;        // InvalidArgument
  bool namesTheGroup = false;  // some refusal text mentions "group"
  std::string stall;           // why it stopped making progress, if it did
};

// Submits `total` entries as one group through the 256-entry ring, draining completions as it
// goes. Completions beyond the completion ring wait in the daemon until the client, having
// popped some while more are owed than the ring holds, rings it (protocol.h); nothing else wakes
// the daemon here, so a daemon that stops reading the ring of an open group shows as a stall.
LongGroupOutcome submitLongGroup(RawClient& client, const ipc::SubmitEntry& entry, uint64_t total) {
  LongGroupOutcome out;
  const uint64_t ringEntries = client.welcome().ringEntries;
  uint64_t submitted = 0, completed = 0;
  auto lastProgress = std::chrono::steady_clock::now();
  while (completed < total) {
    bool progress = false;
    while (submitted < total) {
      ipc::SubmitEntry e = entry;
      if (submitted + 1 < total) e.flags = ipc::kEntryGroupMore;
      if (!client.submit(e).isOk()) break;  // the ring is full: drain completions first
      ++submitted;
      progress = true;
    }
    const uint64_t owed = submitted - completed;
    ipc::CompletionEntry c;
    uint64_t popped = 0;
    while (client.pollCompletion(&c)) {
      ++popped;
      out.ok += c.status == 0;
      if (c.status == static_cast<int32_t>(Code::InvalidArgument)) {
        ++out.refused;
        out.namesTheGroup |= completionText(c).find("group") != std::string::npos;
      }
    }
    completed += popped;
    if (popped != 0 && owed > ringEntries) client.ringDaemon();
    auto now = std::chrono::steady_clock::now();
    if (progress || popped != 0) {
      lastProgress = now;
    } else if (now - lastProgress > seconds(10)) {
      out.stall = "no progress for 10 s: " + std::to_string(submitted) + " of " +
                  std::to_string(total) + " entries of one open group submitted, " +
                  std::to_string(completed) + " completed";
      return out;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return out;
}

// kMaxGroupOps operations in one group are allowed, however many rings full that takes.
TEST_F(BadInputEntryTest, GroupOfExactlyTheLimitCompletes) {
  auto out = submitLongGroup(*client_, allreduce(0, a_.offset, b_.offset), ipc::kMaxGroupOps);
  ASSERT_TRUE(out.stall.empty()) << out.stall << "\n" << daemon_->logTail();
  EXPECT_EQ(out.ok, ipc::kMaxGroupOps);
}

// One more is refused: every entry of the group fails, and the text says why. The daemon must
// keep reading the ring while the group is open (a client cannot close a group it cannot finish
// writing).
TEST_F(BadInputEntryTest, GroupLongerThanTheLimitIsRefusedAndNeverStallsTheRing) {
  const uint64_t total = uint64_t{ipc::kMaxGroupOps} + 1;
  auto out = submitLongGroup(*client_, allreduce(0, a_.offset, b_.offset), total);
  ASSERT_TRUE(out.stall.empty()) << out.stall << "\n" << daemon_->logTail();
  EXPECT_EQ(out.refused, total) << "every entry of the refused group must fail";
  EXPECT_TRUE(out.namesTheGroup) << "no completion says the group is too long";
}

// Two raw clients of one thread, ranks 0 and 1 of one communicator.
class TwoRankRawTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    daemon_ = DaemonProcess::start({}, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    uint8_t key[16];
    randomKey(key);
    std::vector<uint64_t> initIds;
    for (int r = 0; r < 2; ++r) {
      auto client = RawClient::connect(daemon_->socketPath());
      ASSERT_TRUE(client.isOk()) << client.status().toString();
      clients_[r] = std::make_unique<RawClient>(std::move(*client));
      Status s = clients_[r]->handshake();
      ASSERT_TRUE(s.isOk()) << s.toString();
      auto a = clients_[r]->memAlloc(kBufferBytes);
      auto b = clients_[r]->memAlloc(kBufferBytes);
      ASSERT_TRUE(a.isOk() && b.isOk());
      a_[r] = a->offset;
      b_[r] = b->offset;
      auto id = clients_[r]->submitCommInit(key, 2, r);
      ASSERT_TRUE(id.isOk());
      initIds.push_back(*id);
    }
    for (int r = 0; r < 2; ++r) {
      auto c = clients_[r]->waitCompletion(initIds[r]);
      ASSERT_TRUE(c.isOk()) << c.status().toString() << "\n" << daemon_->logTail();
      ASSERT_EQ(c->status, 0) << completionText(*c);
      comm_[r] = c->value;
    }
  }

  void TearDown() override {
    if (!daemon_) return;
    Status serves = checkDaemonServes(daemon_->socketPath());
    EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << daemon_->logTail();
    for (auto& c : clients_) c.reset();
    EXPECT_EQ(daemon_->stop(), 0) << daemon_->logTail();
  }

  int32_t* at(int r, uint64_t offset) {
    return reinterpret_cast<int32_t*>(clients_[r]->segment() + offset);
  }

  // Rank 0 sends 16 int32; rank 1 receives recvCount elements of recvDtype. Both ends must get
  // the same InvalidArgument naming the mismatch, and so must the next op on either rank.
  void expectTransferMismatch(uint64_t recvCount, uint8_t recvDtype) {
    auto sendId = clients_[0]->submit(
        makeEntry(OpType::Send, comm_[0], kInt32, 0, 16, a_[0], ipc::kNoBuffer, 1));
    auto recvId = clients_[1]->submit(
        makeEntry(OpType::Recv, comm_[1], recvDtype, 0, recvCount, ipc::kNoBuffer, b_[1], 0));
    ASSERT_TRUE(sendId.isOk() && recvId.isOk());
    auto sent = clients_[0]->waitCompletion(*sendId);
    auto received = clients_[1]->waitCompletion(*recvId);
    ASSERT_TRUE(sent.isOk() && received.isOk()) << "hung\n" << daemon_->logTail();
    EXPECT_EQ(sent->status, static_cast<int32_t>(Code::InvalidArgument)) << completionText(*sent);
    EXPECT_EQ(received->status, sent->status) << completionText(*received);
    EXPECT_NE(completionText(*sent).find("mismatch"), std::string::npos) << completionText(*sent);
    EXPECT_EQ(completionText(*received), completionText(*sent));
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + ", the op after the mismatch");
      auto later =
          clients_[r]->call(makeEntry(OpType::AllReduce, comm_[r], kInt32, kSum, 16, a_[r], b_[r]));
      ASSERT_TRUE(later.isOk()) << later.status().toString();
      EXPECT_EQ(later->status, sent->status) << completionText(*later);
      EXPECT_EQ(completionText(*later), completionText(*sent));
    }
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<RawClient> clients_[2];
  uint64_t a_[2] = {};
  uint64_t b_[2] = {};
  uint64_t comm_[2] = {};
};

TEST_F(TwoRankRawTest, TransferWithDifferentCountsFailsBothEndsWithTheSameError) {
  expectTransferMismatch(17, kInt32);
}

TEST_F(TwoRankRawTest, TransferWithDifferentDtypesFailsBothEndsWithTheSameError) {
  expectTransferMismatch(16, 7 /* HC_FLOAT32 */);
}

// Rank 0 posts {send, recv}, rank 1 {recv, send}: matched per peer pair, not by position.
TEST_F(TwoRankRawTest, GroupsPostedInOppositeOrdersMatchAndDeliver) {
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 32; ++i) {
      at(r, a_[r])[i] = 1000 * (r + 1) + i;
      at(r, b_[r])[i] = -1;
    }
  }
  auto send = [&](int r) {
    return makeEntry(OpType::Send, comm_[r], kInt32, 0, 32, a_[r], ipc::kNoBuffer, 1 - r);
  };
  auto recv = [&](int r) {
    return makeEntry(OpType::Recv, comm_[r], kInt32, 0, 32, ipc::kNoBuffer, b_[r], 1 - r);
  };
  std::vector<ipc::SubmitEntry> groups[2] = {{send(0), recv(0)}, {recv(1), send(1)}};
  std::vector<uint64_t> ids[2];
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < groups[r].size(); ++i) {
      if (i + 1 < groups[r].size()) groups[r][i].flags = ipc::kEntryGroupMore;
      auto id = clients_[r]->submit(groups[r][i]);
      ASSERT_TRUE(id.isOk());
      ids[r].push_back(*id);
    }
  }
  for (int r = 0; r < 2; ++r) {
    auto done = clients_[r]->waitCompletions(ids[r]);
    ASSERT_TRUE(done.isOk()) << done.status().toString() << "\n" << daemon_->logTail();
    for (const auto& c : *done) EXPECT_EQ(c.status, 0) << completionText(c);
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(at(r, b_[r])[i], 1000 * (2 - r) + i) << "rank " << r << " element " << i;
    }
  }
}

}  // namespace
}  // namespace hc::integ
