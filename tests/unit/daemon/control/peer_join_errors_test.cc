// The Peer bootstrap when it goes wrong: every failure is a clear error, on time, for the joiners
// it concerns, and the root keeps serving.
#include <gmock/gmock.h>

#include <future>
#include <thread>

#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

using ::testing::HasSubstr;

class PeerJoinErrorTest : public PeerFixture {};

TEST_F(PeerJoinErrorTest, DuplicateRankFailsOnlyTheDuplicate) {
  peer::CommKey key = keyOf(10);
  Joiners joiners(root_, tokenPath_);
  size_t first = joiners.start(makeJoin(key, 2, {0}, "a"), Clock::now() + 20s);
  awaitJoined(key, 1);

  Result<peer::RankTable> duplicate =
      newClient()->join(root_, makeJoin(key, 2, {0}, "b"), Clock::now() + 20s);
  ASSERT_FALSE(duplicate.isOk());
  EXPECT_EQ(duplicate.status().code(), Code::InvalidArgument);
  EXPECT_THAT(duplicate.status().message(), HasSubstr("duplicate rank 0"));
  EXPECT_THAT(duplicate.status().message(), HasSubstr("host-a"));

  // The communicator is intact: the real rank 1 completes it.
  size_t second = joiners.start(makeJoin(key, 2, {1}, "c"), Clock::now() + 20s);
  joiners.joinAll();
  ASSERT_TRUE(joiners.result(first).isOk()) << joiners.result(first).status().toString();
  ASSERT_TRUE(joiners.result(second).isOk()) << joiners.result(second).status().toString();
  EXPECT_EQ(joiners.result(first).value().nodes.size(), 2u);
}

TEST_F(PeerJoinErrorTest, NranksMismatchFailsEveryJoiner) {
  peer::CommKey key = keyOf(11);
  Joiners joiners(root_, tokenPath_);
  size_t a = joiners.start(makeJoin(key, 3, {0}, "a"), Clock::now() + 20s);
  size_t b = joiners.start(makeJoin(key, 3, {1}, "b"), Clock::now() + 20s);
  awaitJoined(key, 2);

  const Result<peer::RankTable> odd =
      newClient()->join(root_, makeJoin(key, 4, {2}, "c"), Clock::now() + 20s);
  joiners.joinAll();
  for (const Result<peer::RankTable>* r : {&odd, &joiners.result(a), &joiners.result(b)}) {
    ASSERT_FALSE(r->isOk());
    EXPECT_EQ(r->status().code(), Code::InvalidArgument);
    EXPECT_THAT(r->status().message(), HasSubstr("nranks mismatch"));
    EXPECT_THAT(r->status().message(), HasSubstr("says 4"));
  }
  EXPECT_TRUE(server_->registry().joinedRanks(key).empty());
}

TEST_F(PeerJoinErrorTest, MissingRankFailsEveryJoinerAtTheDeadline) {
  constexpr auto kDeadline = 300ms;
  constexpr auto kSlack = 700ms;  // two shared cores, other builds running
  peer::CommKey key = keyOf(12);
  Joiners joiners(root_, tokenPath_);
  const auto began = Clock::now();
  const auto deadline = began + kDeadline;
  joiners.start(makeJoin(key, 3, {0}, "a"), deadline);
  joiners.start(makeJoin(key, 3, {1}, "b"), deadline);
  joiners.joinAll();
  for (size_t i = 0; i < joiners.size(); ++i) {
    const Result<peer::RankTable>& r = joiners.result(i);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), Code::Timeout) << r.status().toString();
    // The root's message, not gRPC's own deadline: it names who is missing.
    EXPECT_THAT(r.status().message(), HasSubstr("waiting for ranks 2"));
    EXPECT_GE(joiners.finishedAt(i), deadline) << "failed before the deadline";
    EXPECT_LE(joiners.finishedAt(i), deadline + kSlack);
  }

  // A straggler gets the same failure at once instead of opening the communicator again.
  const auto lateBegan = Clock::now();
  Result<peer::RankTable> late =
      newClient()->join(root_, makeJoin(key, 3, {2}, "c"), Clock::now() + 20s);
  ASSERT_FALSE(late.isOk());
  EXPECT_EQ(late.status().code(), Code::Timeout);
  EXPECT_THAT(late.status().message(), HasSubstr("already failed"));
  EXPECT_LT(Clock::now() - lateBegan, 5s);
}

// The timer sleeps until the earliest deadline; a join bringing an earlier one must wake it.
TEST_F(PeerJoinErrorTest, EarlierDeadlineOfAnotherCommunicatorIsKept) {
  peer::CommKey patient = keyOf(13);
  peer::CommKey hurried = keyOf(14);
  Joiners joiners(root_, tokenPath_);
  size_t p0 = joiners.start(makeJoin(patient, 2, {0}, "a"), Clock::now() + 20s);
  awaitJoined(patient, 1);
  const auto began = Clock::now();
  Result<peer::RankTable> hurriedResult =
      newClient()->join(root_, makeJoin(hurried, 2, {0}, "b"), Clock::now() + 300ms);
  const auto hurriedElapsed = Clock::now() - began;
  EXPECT_EQ(hurriedResult.status().code(), Code::Timeout) << hurriedResult.status().toString();
  EXPECT_LE(hurriedElapsed, 1000ms) << "the timer slept past the earlier deadline";

  // The patient communicator was not touched: its last rank completes it.
  size_t p1 = joiners.start(makeJoin(patient, 2, {1}, "c"), Clock::now() + 20s);
  joiners.joinAll();
  EXPECT_TRUE(joiners.result(p0).isOk()) << joiners.result(p0).status().toString();
  EXPECT_TRUE(joiners.result(p1).isOk()) << joiners.result(p1).status().toString();
}

TEST_F(PeerJoinErrorTest, WrongTokenIsRefusedAndLeavesNoTrace) {
  const std::string otherToken = dir_.file("other-token");
  writeFile(otherToken, "a-different-cluster-token-entirely", 0600);
  peer::CommKey key = keyOf(15);
  Result<peer::RankTable> r =
      newClient(otherToken)->join(root_, makeJoin(key, 2, {0}, "intruder"), Clock::now() + 20s);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::PermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("membership proof"));
  EXPECT_TRUE(server_->registry().joinedRanks(key).empty());

  // Members still join that key.
  Joiners joiners(root_, tokenPath_);
  joiners.start(makeJoin(key, 2, {0}, "a"), Clock::now() + 20s);
  joiners.start(makeJoin(key, 2, {1}, "b"), Clock::now() + 20s);
  joiners.joinAll();
  EXPECT_TRUE(joiners.result(0).isOk()) << joiners.result(0).status().toString();
  EXPECT_TRUE(joiners.result(1).isOk()) << joiners.result(1).status().toString();
}

TEST_F(PeerJoinErrorTest, JoinerOfAnotherWireVersionIsRefusedNamingBoth) {
  peer::CommKey key = keyOf(16);
  peer::JoinRequest old = makeJoin(key, 2, {0}, "old");
  old.wireVersion = 1;
  Result<peer::RankTable> r = newClient()->join(root_, old, Clock::now() + 20s);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::InvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("speaks wire version 1"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("this daemon wire version " + std::to_string(transport::kWireVersion)));
  EXPECT_TRUE(server_->registry().joinedRanks(key).empty());
}

TEST_F(PeerJoinErrorTest, UnsafeTokenFileIsRefusedByServerAndClient) {
  const std::string readable = dir_.file("readable-token");
  writeFile(readable, kToken, 0644);

  PeerServerOptions serverOptions;
  serverOptions.tokenPath = readable;
  Result<std::unique_ptr<PeerServer>> server = PeerServer::start(serverOptions);
  ASSERT_FALSE(server.isOk());
  EXPECT_EQ(server.status().code(), Code::PermissionDenied);
  EXPECT_THAT(server.status().message(), HasSubstr("0644"));

  PeerClientOptions clientOptions;
  clientOptions.tokenPath = readable;
  Result<std::unique_ptr<PeerClient>> client = PeerClient::create(clientOptions);
  ASSERT_FALSE(client.isOk());
  EXPECT_EQ(client.status().code(), Code::PermissionDenied);
}

TEST_F(PeerJoinErrorTest, SecondListenerOnTheSamePortFails) {
  PeerServerOptions options;
  options.tokenPath = tokenPath_;
  options.bindAddress = root_;
  Result<std::unique_ptr<PeerServer>> second = PeerServer::start(options);
  ASSERT_FALSE(second.isOk()) << "SO_REUSEPORT must be off";
  EXPECT_EQ(second.status().code(), Code::Unavailable);
}

TEST_F(PeerJoinErrorTest, ShutdownFailsPendingJoins) {
  peer::CommKey key = keyOf(16);
  Joiners joiners(root_, tokenPath_);
  joiners.start(makeJoin(key, 2, {0}, "a"), Clock::now() + 20s);
  awaitJoined(key, 1);
  server_->shutdown();
  joiners.joinAll();
  ASSERT_FALSE(joiners.result(0).isOk());
  EXPECT_EQ(joiners.result(0).status().code(), Code::Unavailable);
  EXPECT_THAT(joiners.result(0).status().message(), HasSubstr("shutting down"));
}

TEST_F(PeerJoinErrorTest, UnreachableRootTimesOutAtTheDeadline) {
  // The port of a listener that has just shut down: nothing listens there.
  server_->shutdown();
  const auto began = Clock::now();
  Result<peer::RankTable> r =
      newClient()->join(root_, makeJoin(keyOf(17), 2, {0}, "a"), Clock::now() + 300ms);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::Timeout) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("Peer.Challenge at " + root_));
  EXPECT_LE(Clock::now() - began, 1000ms);
}

// A root with room for one forming communicator: a second one's joiner is refused for capacity
// and asks again until the first forms, or until its own deadline.
class PeerCapacityTest : public PeerFixture {
 protected:
  void configure(PeerServerOptions& options) override { options.maxPendingComms = 1; }
};

TEST_F(PeerCapacityTest, ARefusedJoinerAsksAgainUntilThereIsRoom) {
  const peer::CommKey first = keyOf(40), second = keyOf(41);
  Joiners joiners(root_, tokenPath_);
  joiners.start(makeJoin(first, 2, {0}, "a"), Clock::now() + 20s);
  awaitJoined(first, 1);
  const size_t waiting = joiners.start(makeJoin(second, 1, {0}, "b"), Clock::now() + 20s);
  // Refused for as long as the first is forming: no slot, so nothing of it is pending.
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(server_->registry().joinedRanks(second).empty());
  const auto completed = Clock::now();
  joiners.start(makeJoin(first, 2, {1}, "c"), Clock::now() + 20s);
  joiners.joinAll();
  for (size_t i = 0; i < joiners.size(); ++i) {
    ASSERT_TRUE(joiners.result(i).isOk()) << i << ": " << joiners.result(i).status().toString();
  }
  EXPECT_EQ(joiners.result(waiting).value().nranks, 1u);
  EXPECT_GE(joiners.finishedAt(waiting), completed) << "it formed before there was room";
  EXPECT_LE(joiners.finishedAt(waiting) - completed, 3s) << "pauses are at most 1 s";
}

TEST_F(PeerCapacityTest, ARootThatStaysFullAnswersAtTheDeadline) {
  Joiners joiners(root_, tokenPath_);
  joiners.start(makeJoin(keyOf(42), 2, {0}, "a"), Clock::now() + 20s);
  awaitJoined(keyOf(42), 1);
  const auto began = Clock::now();
  Result<peer::RankTable> r =
      newClient()->join(root_, makeJoin(keyOf(43), 1, {0}, "b"), Clock::now() + 500ms);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::NoResource) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("communicators forming"));
  EXPECT_GE(Clock::now() - began, 250ms) << "refused once and given up at once";
  EXPECT_LE(Clock::now() - began, 3s);
  server_->shutdown();  // the first joiner's answer
}

// A joiner whose client went away withdraws its join: the root forgets the ranks at once, and
// the join's callback runs with Unavailable. A join waiting out a capacity pause ends too.
TEST_F(PeerCapacityTest, AWithdrawnJoinLeavesTheRootAndEndsItsPause) {
  const peer::CommKey key = keyOf(44);
  std::unique_ptr<PeerClient> client = newClient();
  std::promise<Result<peer::RankTable>> pendingAnswer, pausedAnswer;
  const JoinId pending =
      client->joinAsync(root_, makeJoin(key, 2, {0}, "a"), Clock::now() + 20s,
                        [&](Result<peer::RankTable> r) { pendingAnswer.set_value(std::move(r)); });
  awaitJoined(key, 1);
  // The root is full now: this one is refused and pauses.
  const JoinId paused =
      client->joinAsync(root_, makeJoin(keyOf(45), 1, {0}, "b"), Clock::now() + 20s,
                        [&](Result<peer::RankTable> r) { pausedAnswer.set_value(std::move(r)); });
  std::this_thread::sleep_for(100ms);

  // The root stays full, so the paused join can only end by being withdrawn.
  const auto withdrawn = Clock::now();
  client->withdraw(paused);
  auto pausedResult = pausedAnswer.get_future();
  ASSERT_EQ(pausedResult.wait_for(10s), std::future_status::ready);
  Result<peer::RankTable> r = pausedResult.get();
  EXPECT_LE(Clock::now() - withdrawn, 3s) << "a pause lasts at most 1 s";
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::Unavailable) << r.status().toString();
  EXPECT_THAT(r.status().message(), HasSubstr("withdrawn"));

  client->withdraw(pending);
  EXPECT_TRUE(server_->registry().waitForJoinedCount(key, 0, 10s)) << "the root kept rank 0";
  auto answer = pendingAnswer.get_future();
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(answer.get().status().code(), Code::Unavailable);
}

}  // namespace
}  // namespace hc::control::testing
