// hc_comm_init_all against a real daemon, from the test process: every rank of the communicator
// is in this process. Each rank's allreduce is checked against sums computed here, with the ranks
// issued from one thread inside a group and from a thread per rank; then the devices each rank
// reports (a split inherits its parent's), and the failures: bad arguments, and a join the daemon
// refuses, each leaving every comms[i] NULL.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "hetero_comm/hc.h"
#include "tests/integration/in_process_daemon.h"

namespace hc::integ {
namespace {

// Rank r's element k: the sum over n ranks is exact in every order.
int32_t valueOf(int rank, size_t k) { return (rank + 1) * static_cast<int32_t>(k % 7 + 1); }
int32_t sumOf(int nranks, size_t k) {
  return static_cast<int32_t>(k % 7 + 1) * nranks * (nranks + 1) / 2;
}

// A pointer no call may leave behind: a failed hc_comm_init_all sets every entry to NULL.
hc_comm_t notSet() { return reinterpret_cast<hc_comm_t>(uintptr_t{0x1}); }

void destroyAll(std::vector<hc_comm_t>& comms) {
  for (hc_comm_t& c : comms) {
    if (c == nullptr) continue;
    EXPECT_EQ(hc_comm_finalize(c), HC_OK) << hc_get_last_error(c);
    EXPECT_EQ(hc_comm_destroy(c), HC_OK) << hc_get_last_error(nullptr);
    c = nullptr;
  }
}

struct Buffers {
  std::vector<std::vector<int32_t>> send, recv;
  Buffers(int nranks, size_t count)
      : send(static_cast<size_t>(nranks)), recv(static_cast<size_t>(nranks)) {
    for (int r = 0; r < nranks; ++r) {
      for (size_t k = 0; k < count; ++k) send[static_cast<size_t>(r)].push_back(valueOf(r, k));
      recv[static_cast<size_t>(r)].assign(count, -1);
    }
  }
  void expectSums(int nranks) const {
    for (int r = 0; r < nranks; ++r) {
      const auto& got = recv[static_cast<size_t>(r)];
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k], sumOf(nranks, k)) << "rank " << r << ", element " << k;
      }
    }
  }
};

using Param = std::tuple<int, size_t>;  // ndev, count

class CommInitAllTest : public ::testing::TestWithParam<Param> {};

TEST_P(CommInitAllTest, EveryRankAllreducesRightFromOneThreadInAGroup) {
  const auto [ndev, count] = GetParam();
  std::vector<hc_comm_t> comms(static_cast<size_t>(ndev), notSet());
  ASSERT_EQ(hc_comm_init_all(comms.data(), ndev, nullptr), HC_OK) << hc_get_last_error(nullptr);
  for (int r = 0; r < ndev; ++r) {
    hc_comm_t c = comms[static_cast<size_t>(r)];
    ASSERT_NE(c, nullptr);
    int n = 0, rank = -1, device = -2;
    ASSERT_EQ(hc_comm_count(c, &n), HC_OK);
    ASSERT_EQ(hc_comm_user_rank(c, &rank), HC_OK);
    ASSERT_EQ(hc_comm_device(c, &device), HC_OK);
    EXPECT_EQ(n, ndev);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(device, r) << "a NULL devlist puts rank i on device i";
  }
  Buffers b(ndev, count);
  std::vector<hc_request_t> reqs(static_cast<size_t>(ndev), nullptr);
  ASSERT_EQ(hc_group_start(), HC_OK);
  for (size_t r = 0; r < comms.size(); ++r) {
    ASSERT_EQ(hc_allreduce(b.send[r].data(), b.recv[r].data(), count, HC_INT32, HC_SUM, comms[r],
                           nullptr, &reqs[r]),
              HC_OK)
        << hc_get_last_error(comms[r]);
  }
  ASSERT_EQ(hc_group_end(), HC_OK) << hc_get_last_error(nullptr);
  for (size_t r = 0; r < reqs.size(); ++r) {
    EXPECT_EQ(hc_wait(&reqs[r]), HC_OK) << "rank " << r << ": " << hc_get_last_error(comms[r]);
  }
  b.expectSums(ndev);
  destroyAll(comms);
}

TEST_P(CommInitAllTest, EveryRankAllreducesRightFromAThreadEach) {
  const auto [ndev, count] = GetParam();
  std::vector<hc_comm_t> comms(static_cast<size_t>(ndev), nullptr);
  ASSERT_EQ(hc_comm_init_all(comms.data(), ndev, nullptr), HC_OK) << hc_get_last_error(nullptr);
  Buffers b(ndev, count);
  std::vector<hc_status_t> results(static_cast<size_t>(ndev), HC_INTERNAL);
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < comms.size(); ++r) {
    ranks.emplace_back([&, r] {
      // Twice, in place the second time: each waits for every other rank's thread.
      hc_status_t s = hc_allreduce(b.send[r].data(), b.recv[r].data(), count, HC_INT32, HC_SUM,
                                   comms[r], nullptr, nullptr);
      if (s == HC_OK) {
        s = hc_allreduce(b.send[r].data(), b.send[r].data(), count, HC_INT32, HC_SUM, comms[r],
                         nullptr, nullptr);
      }
      results[r] = s == HC_OK ? hc_comm_finalize(comms[r]) : s;
    });
  }
  for (std::thread& t : ranks) t.join();
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r], HC_OK) << "rank " << r;
  b.expectSums(ndev);
  for (size_t r = 0; r < b.send.size(); ++r) EXPECT_EQ(b.send[r], b.recv[r]) << "rank " << r;
  destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommInitAllTest,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(size_t{1}, size_t{4097})),
                         [](const auto& p) {
                           return "ndev" + std::to_string(std::get<0>(p.param)) + "_count" +
                                  std::to_string(std::get<1>(p.param));
                         });

// Rank i is on devlist[i], and a split keeps each rank on its device.
TEST(CommInitAllDeviceTest, RanksReportTheirDevicesAndSplitsInheritThem) {
  const std::vector<int> devlist = {5, 0, 2};
  std::vector<hc_comm_t> comms(devlist.size(), nullptr);
  ASSERT_EQ(hc_comm_init_all(comms.data(), 3, devlist.data()), HC_OK) << hc_get_last_error(nullptr);
  for (size_t r = 0; r < comms.size(); ++r) {
    int device = -2;
    ASSERT_EQ(hc_comm_device(comms[r], &device), HC_OK);
    EXPECT_EQ(device, devlist[r]) << "rank " << r;
  }
  // Non-blocking: a blocking split of one rank would wait for the others, issued after it.
  hc_config_t config = HC_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::vector<hc_comm_t> children(comms.size(), nullptr);
  for (size_t r = 0; r < comms.size(); ++r) {
    ASSERT_EQ(hc_comm_split(comms[r], 0, static_cast<int>(r), &children[r], &config),
              HC_IN_PROGRESS)
        << hc_get_last_error(comms[r]);
  }
  for (size_t r = 0; r < children.size(); ++r) {
    hc_status_t async = HC_IN_PROGRESS;
    for (int i = 0; i < 30000 && async == HC_IN_PROGRESS; ++i) {
      ASSERT_EQ(hc_comm_get_async_error(children[r], &async), HC_OK);
      if (async == HC_IN_PROGRESS) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(async, HC_OK) << hc_get_last_error(children[r]);
    int device = -2;
    ASSERT_EQ(hc_comm_device(children[r], &device), HC_OK);
    EXPECT_EQ(device, devlist[r]) << "child of rank " << r;
  }
  destroyAll(children);
  destroyAll(comms);
}

// What a failed call leaves: an error, the reason in hc_get_last_error, and no communicator.
void expectRefused(int ndev, const int* devlist, const std::string& why) {
  SCOPED_TRACE("ndev " + std::to_string(ndev) + ", expecting '" + why + "'");
  std::vector<hc_comm_t> comms(static_cast<size_t>(ndev > 0 ? ndev : 1), notSet());
  EXPECT_EQ(hc_comm_init_all(comms.data(), ndev, devlist), HC_INVALID_ARGUMENT);
  const std::string text = hc_get_last_error(nullptr);
  EXPECT_NE(text.find(why), std::string::npos) << text;
  if (ndev > 0) {
    for (hc_comm_t c : comms) EXPECT_EQ(c, nullptr);
  }
}

TEST(CommInitAllFailureTest, BadArgumentsFailWithoutACommunicator) {
  EXPECT_EQ(hc_comm_init_all(nullptr, 2, nullptr), HC_INVALID_ARGUMENT);
  expectRefused(0, nullptr, "at least 1 rank");
  expectRefused(-3, nullptr, "at least 1 rank");
  const int negative[] = {0, -1};
  expectRefused(2, negative, "devlist[1] is -1");
  const int twice[] = {3, 1, 3};
  expectRefused(3, twice, "device 3 is listed twice");
}

// More ranks than the daemon's session.max_ranks: it refuses every join; no rank is left made,
// and the next call forms a communicator as usual.
TEST(CommInitAllFailureTest, JoinsTheDaemonRefusesFailEveryRank) {
  expectRefused(kInProcessMaxRanks + 1, nullptr, "session.max_ranks");
  std::vector<hc_comm_t> comms(2, nullptr);
  ASSERT_EQ(hc_comm_init_all(comms.data(), 2, nullptr), HC_OK) << hc_get_last_error(nullptr);
  Buffers b(2, 3);
  ASSERT_EQ(hc_group_start(), HC_OK);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(hc_allreduce(b.send[r].data(), b.recv[r].data(), 3, HC_INT32, HC_SUM, comms[r],
                           nullptr, nullptr),
              HC_OK);
  }
  ASSERT_EQ(hc_group_end(), HC_OK);
  destroyAll(comms);  // finalize waits for the allreduce
  b.expectSums(2);
}

}  // namespace
}  // namespace hc::integ
