// Communicator matching: units run in posting order, groups match whatever the posting order,
// transfers to self, disagreements and failures reach every rank once. Each rank is a real
// Session (socketpair + Hello) so completions are read back from its completion ring.
#include "daemon/session/communicator.h"

#include <sys/socket.h>

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"
#include "daemon/session/session.h"

namespace hc::session {
namespace {

using ipc::OpType;

class CommunicatorTest : public ::testing::Test {
 protected:
  void makeRanks(int n) {
    for (int r = 0; r < n; ++r) {
      int sv[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
      peers_.emplace_back(sv[1]);
      auto s = std::make_shared<Session>(r + 1, UniqueFd(sv[0]), PeerIdentity{});
      auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 1);
      ASSERT_TRUE(s->handleFrame(ipc::frameBytes(hello), {}, 1 << 20, 1 << 20, 64).isOk());
      ASSERT_TRUE(receiveMessage(sv[1], ipc::kMaxFrameBytes, true).isOk());
      sessions_.push_back(s);
    }
    comm_ = std::make_unique<Communicator>(7, n, 0);
    for (int r = 0; r < n; ++r) comm_->setMember(r, sessions_[r].get());
  }

  // Posts an op for rank; request ids are unique across the test.
  uint64_t post(int rank, OpType type, int peer = -1, uint64_t count = 4, bool closes = true) {
    PendingOp op;
    op.requestId = nextRequest_++;
    op.session = sessions_[rank];
    op.type = type;
    op.dtype = Dtype{7};
    op.count = count;
    op.root = peer;
    comm_->post(rank, std::move(op), closes);
    return nextRequest_ - 1;
  }

  // Completions that arrived for rank since the last call: request id -> (status, message).
  std::map<uint64_t, std::pair<Code, std::string>> completions(int rank) {
    std::map<uint64_t, std::pair<Code, std::string>> out;
    ipc::CompletionEntry c;
    while (sessions_[rank]->segment()->view().completion.pop(&c) == ipc::PopResult::Ok) {
      out[c.requestId] = {static_cast<Code>(c.status), c.message};
    }
    return out;
  }

  // Runs every match (no data: the test checks matching) and returns how many there were.
  size_t finishAll() {
    size_t n = 0;
    for (auto m = comm_->takeMatches(); !m.empty(); m = comm_->takeMatches()) {
      for (auto& match : m) comm_->finishMatch(match, okStatus());
      n += m.size();
    }
    return n;
  }

  std::vector<UniqueFd> peers_;
  std::vector<SessionPtr> sessions_;
  std::unique_ptr<Communicator> comm_;
  uint64_t nextRequest_ = 100;
};

TEST_F(CommunicatorTest, GroupOfSendsAndReceivesMatchesWhateverThePostingOrder) {
  makeRanks(3);
  // A ring exchange inside one group per rank; rank 1 posts its receive first, the others
  // their send first. As single ops (no group) the same order could never all match.
  post(0, OpType::Send, 1, 4, false);
  post(0, OpType::Recv, 2, 4, true);
  post(1, OpType::Recv, 0, 4, false);
  post(1, OpType::Send, 2, 4, true);
  post(2, OpType::Send, 0, 4, false);
  post(2, OpType::Recv, 1, 4, true);
  auto matches = comm_->takeMatches();
  ASSERT_EQ(matches.size(), 3u);
  for (const auto& m : matches) {
    ASSERT_EQ(m.ops.size(), 2u);
    EXPECT_EQ(m.ops[0].type, OpType::Send);
    EXPECT_EQ(m.ops[1].type, OpType::Recv);
    EXPECT_EQ(m.ops[0].root, m.refs[1].rank) << "the send names the receiver";
    EXPECT_EQ(m.ops[1].root, m.refs[0].rank) << "the receive names the sender";
  }
  for (auto& m : matches) comm_->finishMatch(m, okStatus());
  for (int r = 0; r < 3; ++r) {
    auto c = completions(r);
    EXPECT_EQ(c.size(), 2u) << "rank " << r;
    for (auto& [id, st] : c) EXPECT_EQ(st.first, Code::Ok) << st.second;
  }
}

TEST_F(CommunicatorTest, UnitsOfOneRankRunInPostingOrder) {
  makeRanks(2);
  post(0, OpType::AllReduce);
  post(0, OpType::Send, 1);
  post(1, OpType::Recv, 0);  // behind nothing on rank 1, but rank 0's send waits for the allreduce
  EXPECT_TRUE(comm_->takeMatches().empty());
  post(1, OpType::AllReduce);  // queued behind rank 1's receive: still nothing can match
  EXPECT_TRUE(comm_->takeMatches().empty());
  EXPECT_TRUE(completions(0).empty());
  EXPECT_FALSE(comm_->failed());
}

TEST_F(CommunicatorTest, LaterUnitMatchesOnlyAfterTheHeadFinished) {
  makeRanks(2);
  post(0, OpType::AllReduce);
  post(1, OpType::AllReduce);
  post(0, OpType::Broadcast, 0);
  post(1, OpType::Broadcast, 0);
  auto first = comm_->takeMatches();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].ops[0].type, OpType::AllReduce);
  EXPECT_TRUE(comm_->takeMatches().empty()) << "op 1 must wait for op 0";
  comm_->finishMatch(first[0], okStatus());
  auto second = comm_->takeMatches();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].ops[0].type, OpType::Broadcast);
  EXPECT_EQ(second[0].seq, 1u);
}

TEST_F(CommunicatorTest, SendToSelfMatchesItsReceiveInTheSameGroup) {
  makeRanks(2);
  post(1, OpType::Recv, 1, 4, false);
  post(1, OpType::Send, 1, 4, true);
  EXPECT_EQ(finishAll(), 1u);
  auto c = completions(1);
  ASSERT_EQ(c.size(), 2u);
  for (auto& [id, st] : c) EXPECT_EQ(st.first, Code::Ok);
}

TEST_F(CommunicatorTest, SendToSelfWithoutItsReceiveIsRefused) {
  makeRanks(2);
  uint64_t id = post(0, OpType::Send, 0);
  auto c = completions(0);
  ASSERT_EQ(c.count(id), 1u);
  EXPECT_EQ(c[id].first, Code::InvalidArgument);
  EXPECT_NE(c[id].second.find("send to self"), std::string::npos) << c[id].second;
  EXPECT_FALSE(comm_->failed()) << "a refused unit is the caller's error, not the communicator's";
}

TEST_F(CommunicatorTest, TransferWhoseCountsDisagreeFailsBothRanksWithOneMessage) {
  makeRanks(2);
  uint64_t s = post(0, OpType::Send, 1, 10);
  uint64_t r = post(1, OpType::Recv, 0, 12);
  EXPECT_TRUE(comm_->failed());
  auto c0 = completions(0), c1 = completions(1);
  ASSERT_EQ(c0.count(s), 1u);
  ASSERT_EQ(c1.count(r), 1u);
  EXPECT_EQ(c0[s].first, Code::InvalidArgument);
  EXPECT_EQ(c0[s], c1[r]);
  EXPECT_NE(c0[s].second.find("mismatch"), std::string::npos) << c0[s].second;
  uint64_t later = post(0, OpType::AllReduce);
  EXPECT_EQ(completions(0)[later].first, Code::InvalidArgument) << "later ops fail at once";
}

TEST_F(CommunicatorTest, CollectiveMismatchFailsEveryRankWithTheSameMessage) {
  makeRanks(3);
  uint64_t a = post(0, OpType::AllReduce, -1, 8);
  uint64_t b = post(1, OpType::AllReduce, -1, 8);
  uint64_t c = post(2, OpType::AllReduce, -1, 9);
  auto c0 = completions(0), c1 = completions(1), c2 = completions(2);
  EXPECT_EQ(c0[a].first, Code::InvalidArgument);
  EXPECT_EQ(c0[a], c1[b]);
  EXPECT_EQ(c0[a], c2[c]);
  EXPECT_NE(c0[a].second.find("count=9"), std::string::npos) << c0[a].second;
}

TEST_F(CommunicatorTest, InvalidOpInsideAGroupRejectsTheWholeGroup) {
  makeRanks(2);
  uint64_t good = post(0, OpType::Send, 1, 4, false);
  comm_->reject(0, sessions_[0], 555, invalidArgument("peer 9 is out of range"), false);
  uint64_t last = post(0, OpType::Recv, 1, 4, true);
  auto c = completions(0);
  ASSERT_EQ(c.size(), 3u);
  for (uint64_t id : {good, uint64_t{555}, last}) {
    EXPECT_EQ(c[id].first, Code::InvalidArgument);
    EXPECT_NE(c[id].second.find("group rejected: peer 9"), std::string::npos) << c[id].second;
  }
  post(1, OpType::Recv, 0);
  EXPECT_TRUE(comm_->takeMatches().empty()) << "the rejected send must not be matched";
}

TEST_F(CommunicatorTest, FailureCompletesWaitingOpsAtOnceAndRunningOnesWhenTheyFinish) {
  makeRanks(2);
  uint64_t s = post(0, OpType::Send, 1, 4, false);
  uint64_t waiting = post(0, OpType::Recv, 1, 4, true);
  uint64_t r = post(1, OpType::Recv, 0);
  auto running = comm_->takeMatches();
  ASSERT_EQ(running.size(), 1u);
  comm_->leave(1, unavailable("rank 1 went away"));
  auto c0 = completions(0);
  EXPECT_EQ(c0.count(s), 0u) << "the running transfer may still write: no completion yet";
  ASSERT_EQ(c0.count(waiting), 1u);
  EXPECT_EQ(c0[waiting].first, Code::Unavailable);
  comm_->finishMatch(running[0], okStatus());
  c0 = completions(0);
  ASSERT_EQ(c0.count(s), 1u);
  EXPECT_EQ(c0[s].first, Code::Unavailable) << "the group failed even though this part ran";
  EXPECT_EQ(completions(1)[r].first, Code::Unavailable);
}

TEST_F(CommunicatorTest, DestroyIsLocalWorkWithoutTheDepartedRankGoesOn) {
  makeRanks(3);
  comm_->depart(0, unavailable("destroyed its handle of the communicator"));
  EXPECT_FALSE(comm_->failed()) << "nothing waiting needed rank 0";
  post(1, OpType::Send, 2);
  post(2, OpType::Recv, 1);
  EXPECT_EQ(finishAll(), 1u) << "a transfer between the other ranks still runs";
  EXPECT_FALSE(comm_->failed());
  uint64_t id = post(1, OpType::AllReduce);
  EXPECT_TRUE(comm_->failed()) << "a collective needs rank 0";
  auto c = completions(1);
  ASSERT_EQ(c.count(id), 1u);
  EXPECT_EQ(c[id].first, Code::Unavailable);
  EXPECT_NE(c[id].second.find("needs rank 0, which destroyed"), std::string::npos) << c[id].second;
}

TEST_F(CommunicatorTest, DestroyFailsWaitingWorkThatNeedsTheDepartedRank) {
  makeRanks(2);
  uint64_t id = post(1, OpType::Recv, 0);
  comm_->depart(0, unavailable("destroyed its handle of the communicator"));
  EXPECT_TRUE(comm_->failed());
  EXPECT_EQ(completions(1)[id].first, Code::Unavailable);
}

// Rank 0 lives on another daemon, whose goodbye says it posted two sends to rank 1: rank 1's
// first two receives from it still run (their messages are on the wire), the third fails.
TEST_F(CommunicatorTest, ReceivesOfSendsADepartedRemoteRankPostedStillRun) {
  makeRanks(2);
  comm_->markRemote(0);
  comm_->depart(
      0, unavailable("destroyed its handle of the communicator"),
      {{0, 1, 2}, {1, 0, 9}, {0, 0, 5}});  // pairs not from rank 0 to a rank here: ignored
  for (int k = 0; k < 2; ++k) {
    post(1, OpType::Recv, 0);
    EXPECT_EQ(finishAll(), 1u) << "receive " << k;
    EXPECT_FALSE(comm_->failed()) << "receive " << k;
  }
  uint64_t third = post(1, OpType::Recv, 0);
  EXPECT_TRUE(comm_->failed());
  auto c = completions(1);
  ASSERT_EQ(c.count(third), 1u);
  EXPECT_NE(c[third].second.find("needs rank 0, which destroyed"), std::string::npos)
      << c[third].second;
}

TEST_F(CommunicatorTest, SentCountsListEveryPairThatPostedSends) {
  makeRanks(3);
  post(0, OpType::Send, 1);
  post(0, OpType::Send, 1);
  post(2, OpType::Send, 0);
  auto counts = comm_->sentCounts();
  std::map<std::pair<int, int>, uint64_t> byPair;
  for (const auto& c : counts) byPair[{c.src, c.dst}] = c.sends;
  EXPECT_EQ(byPair, (std::map<std::pair<int, int>, uint64_t>{{{0, 1}, 2}, {{2, 0}, 1}}));
}

TEST_F(CommunicatorTest, OpTimeoutNamesTheRankThatDidNotPost) {
  makeRanks(3);
  comm_ = std::make_unique<Communicator>(8, 3, 50);
  for (int r = 0; r < 3; ++r) comm_->setMember(r, sessions_[r].get());
  post(0, OpType::AllReduce);
  post(2, OpType::AllReduce);
  auto d = comm_->deadline();
  ASSERT_TRUE(d.has_value());
  comm_->checkDeadline(*d);
  ASSERT_TRUE(comm_->failed());
  auto c = completions(0);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.begin()->second.first, Code::Timeout);
  EXPECT_NE(c.begin()->second.second.find("ranks 1 did not post"), std::string::npos)
      << c.begin()->second.second;
}

}  // namespace
}  // namespace hc::session
