// Communicator identities on the executor's wire: CommIdentities on its own, and what the progress
// thread does with messages nobody has posted a receive for: a retired identity's are stale and
// dropped, an unknown identity's are held (bounded per peer, and in time) and delivered once the
// communicator forms here, and a message is never taken by a communicator it does not name, even
// when the two identities share every bit but one. A bare loopback endpoint plays the other
// daemon by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/coll/net/comm_identities.h"
#include "daemon/coll/net/net_tags.h"
#include "tests/unit/daemon/coll/net/net_executor_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::net::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kLive = 0x6a0b00000000f00dull;
constexpr uint64_t kStale = 0x6a0b00000001f00dull;
constexpr uint64_t kUnknown = 0x6a0b00000002f00dull;

// ---- CommIdentities ----------------------------------------------------------------------------

TEST(CommIdentitiesTest, ClaimRetireAndLookup) {
  CommIdentities ids;
  EXPECT_EQ(ids.lookup(kLive), CommIdentities::Known::Unknown);
  ASSERT_TRUE(ids.claim(kLive).isOk());
  EXPECT_EQ(ids.lookup(kLive), CommIdentities::Known::Live);
  ids.retire(kLive);
  EXPECT_EQ(ids.lookup(kLive), CommIdentities::Known::Retired);
  EXPECT_EQ(ids.lookup(transport::kHeartbeatIdentity), CommIdentities::Known::Reserved);
  EXPECT_EQ(ids.live(), 0u);
}

TEST(CommIdentitiesTest, ALiveOrRetiredIdentityIsRefusedNeverShared) {
  CommIdentities ids;
  ASSERT_TRUE(ids.claim(kLive).isOk());
  Status again = ids.claim(kLive);
  EXPECT_EQ(again.code(), Code::Internal);
  EXPECT_NE(again.message().find("already names another communicator"), std::string::npos);
  ids.retire(kLive);
  EXPECT_EQ(ids.claim(kLive).code(), Code::Internal) << "its stale traffic may still come";
  EXPECT_EQ(ids.claim(transport::kProbeIdentity).code(), Code::InvalidArgument);
  EXPECT_EQ(ids.claim(0).code(), Code::InvalidArgument);
}

TEST(CommIdentitiesTest, RetiredIdentitiesAreRememberedUpToTheCapacity) {
  CommIdentities ids(2);
  for (uint64_t id : {1000ull, 1001ull, 1002ull}) {
    ASSERT_TRUE(ids.claim(id).isOk());
    ids.retire(id);
  }
  EXPECT_EQ(ids.lookup(1000), CommIdentities::Known::Unknown);  // the oldest is forgotten
  EXPECT_EQ(ids.lookup(1001), CommIdentities::Known::Retired);
  EXPECT_EQ(ids.lookup(1002), CommIdentities::Known::Retired);
}

// ---- messages on the wire ----------------------------------------------------------------------

// Counts what the executor reports dropped, by reason.
struct DropCounts {
  std::mutex mutex;
  std::map<std::string, size_t> byReason;

  size_t of(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    return byReason[reason];
  }
  // Waits until `reason` reached `want` (or kDeadline passed); returns the count.
  size_t await(const std::string& reason, size_t want) {
    const auto deadline = Clock::now() + kDeadline;
    while (of(reason) < want && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return of(reason);
  }
};

NetExecutorOptions countingOptions(DropCounts& drops, milliseconds holdFor, size_t heldPerPeer) {
  NetExecutorOptions options = testOptions();
  options.holdUnknownFor = holdFor;
  options.heldMessagesPerPeer = heldPerPeer;
  options.onDropped = [&drops](std::string_view reason, size_t count) {
    std::lock_guard<std::mutex> lock(drops.mutex);
    drops.byReason[std::string(reason)] += count;
  };
  return options;
}

// Node 0 (the executor) receives `count` int32 from node 1 (a bare endpoint) on `comm`, seq 1.
NetJob receiveJob(ExecutorCluster& cluster, transport::LoopbackTransport& bare, uint64_t comm,
                  std::vector<int32_t>& into) {
  NetJob job = cluster.job(0, comm, NetOpKind::Recv, comm, 1);
  job.nodes.push_back(bare.address());
  job.spec.root = 1;
  job.spec.dtype = Dtype{2};  // int32
  job.spec.count = into.size();
  job.spec.buffer = into.data();
  return job;
}

// Sends from the bare endpoint and waits until the send is final (loopback: delivered).
void sendFromBare(transport::LoopbackTransport& bare, transport::PeerId to, transport::Tag tag,
                  const std::vector<int32_t>& values) {
  Result<transport::RequestId> send =
      bare.postSend(to, tag, values.data(), values.size() * sizeof(int32_t));
  ASSERT_TRUE(send.isOk()) << send.status().toString();
  ASSERT_TRUE(finish(bare, *send).isOk());
}

TEST(NetExecutorIdentityTest, ForeignStaleUnknownAndOverLimitMessagesAreDroppedAndCounted) {
  DropCounts drops;
  ExecutorCluster cluster(1, countingOptions(drops, milliseconds(400), 3));
  auto attached = cluster.fabric().attach();
  ASSERT_TRUE(attached.isOk());
  transport::LoopbackTransport& bare = *attached.value();
  CommIdentities& ids = cluster.at(0).identities();
  ASSERT_TRUE(ids.claim(kLive).isOk());
  ASSERT_TRUE(ids.claim(kStale).isOk());
  ids.retire(kStale);

  std::vector<int32_t> got(4, -1);
  cluster.at(0).submit(receiveJob(cluster, bare, kLive, got));
  Result<transport::PeerId> executor = bare.connect(cluster.addresses()[0]);
  ASSERT_TRUE(executor.isOk());

  // Same seq and chunk as the job's receive; the identities differ in one bit above the old 16.
  const uint64_t foreign = kLive ^ (1ull << 40);
  sendFromBare(bare, *executor, dataTag(foreign, 1, 0), {9, 9, 9, 9});
  for (uint64_t seq : {1, 2}) sendFromBare(bare, *executor, dataTag(kStale, seq, 0), {7, 7, 7, 7});
  for (uint64_t seq : {1, 2, 3, 4, 5}) {
    sendFromBare(bare, *executor, dataTag(kUnknown, seq, 0), {5, 5, 5, 5});
  }
  // Six messages of identities not known here, three held at most: three over the limit now, the
  // three held ones once they are older than holdUnknownFor.
  EXPECT_EQ(drops.await("stale", 2), 2u);
  EXPECT_EQ(drops.await("over_limit", 3), 3u);
  Result<NetJobResult> early = cluster.wait(0, kLive, milliseconds(100));
  EXPECT_EQ(early.status().code(), Code::Timeout) << "took a message of another identity";
  EXPECT_EQ(drops.await("unknown", 3), 3u);

  sendFromBare(bare, *executor, dataTag(kLive, 1, 0), {1, 2, 3, 4});
  Result<NetJobResult> result = cluster.wait(0, kLive);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_TRUE(result->status.isOk()) << result->status.toString();
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(drops.of("stale"), 2u);
  EXPECT_EQ(drops.of("over_limit"), 3u);
  EXPECT_EQ(drops.of("unknown"), 3u);
}

TEST(NetExecutorIdentityTest, AMessageThatCameBeforeItsCommunicatorIsDeliveredOnceItForms) {
  DropCounts drops;
  ExecutorCluster cluster(1, countingOptions(drops, milliseconds(5000), 16));
  auto attached = cluster.fabric().attach();
  ASSERT_TRUE(attached.isOk());
  transport::LoopbackTransport& bare = *attached.value();
  // The executor connects to the bare endpoint for a job of another communicator.
  ASSERT_TRUE(cluster.at(0).identities().claim(kLive).isOk());
  std::vector<int32_t> other(1, -1);
  cluster.at(0).submit(receiveJob(cluster, bare, kLive, other));
  Result<transport::PeerId> executor = bare.connect(cluster.addresses()[0]);
  ASSERT_TRUE(executor.isOk());

  // The other daemon heard the root first: its first message comes before the communicator forms.
  sendFromBare(bare, *executor, dataTag(kUnknown, 1, 0), {10, 20, 30});
  std::this_thread::sleep_for(3 * kSweepInterval);  // several sweeps: it stays held
  ASSERT_TRUE(cluster.at(0).identities().claim(kUnknown).isOk());
  std::vector<int32_t> got(3, -1);
  cluster.at(0).submit(receiveJob(cluster, bare, kUnknown, got));
  Result<NetJobResult> result = cluster.wait(0, kUnknown);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_TRUE(result->status.isOk()) << result->status.toString();
  EXPECT_EQ(got, (std::vector<int32_t>{10, 20, 30}));
  EXPECT_EQ(drops.of("unknown") + drops.of("over_limit") + drops.of("stale"), 0u);

  sendFromBare(bare, *executor, dataTag(kLive, 1, 0), {4});  // lets the first job end
  ASSERT_TRUE(cluster.wait(0, kLive).isOk());
}

}  // namespace
}  // namespace hc::coll::net::testing
