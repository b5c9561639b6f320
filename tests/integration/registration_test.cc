// Registration and the release of imported device memory, against a real daemon from the test
// process (libhcclient keeps one connection per process: one daemon for the executable, with one
// sim device, /metrics, and a small devices.max_imported_bytes_per_client). Two ranks of one
// communicator as threads (hc_comm_init_all), their buffers in sim device memory. Read from the
// daemon's /metrics: hetero_comm_device_imports_total, _releases_total and _imported_bytes.
//   - registration imports; operations on registered buffers import nothing more;
//   - memory freed and allocated again (often at the same address) with other contents gives
//     the new contents' results, never stale ones, and each free releases the daemon's import;
//   - past the cap the least recently used idle regions are released and results stay right;
//   - deregistering a buffer an operation still uses, then pressing on the cap, leaves that
//     operation intact; bad handles are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hetero_comm/hc.h"
#include "hetero_comm/hc_sim.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/metrics_scrape.h"

namespace hc::integ {
namespace {

constexpr uint64_t kCap = 4ull << 20;  // devices.max_imported_bytes_per_client
constexpr int kRanks = 2;

int gMetricsPort = 0;  // the daemon's /metrics

class CappedSimDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string error;
    daemon_ = DaemonProcess::start(
        {"--set", "devices.sim.nvidia=1", "--set", "metrics.listen=127.0.0.1:0", "--set",
         "devices.max_imported_bytes_per_client=" + std::to_string(kCap)},
        &error);
    ASSERT_NE(daemon_, nullptr) << error;
    ::setenv("HC_SOCKET", daemon_->socketPath().c_str(), 1);
    gMetricsPort = loggedPort(*daemon_, "metrics listening on http://127.0.0.1:");
    ASSERT_GT(gMetricsPort, 0) << daemon_->logTail();
  }
  // The daemon goes last: handles a failed test left behind only see their connection close.
  void TearDown() override { daemon_.reset(); }

 private:
  std::unique_ptr<DaemonProcess> daemon_;
};

[[maybe_unused]] ::testing::Environment* const kDaemon =
    ::testing::AddGlobalTestEnvironment(new CappedSimDaemon);

struct Imports {
  double imports = 0, releases = 0, bytes = 0;
};

Imports imports() {
  const std::string text = scrapeMetrics(gMetricsPort);
  return {metricSample(text, "hetero_comm_device_imports_total"),
          metricSample(text, "hetero_comm_device_releases_total"),
          metricSample(text, "hetero_comm_device_imported_bytes")};
}

// A sim allocation of `count` int32 elements, freed by the destructor unless released.
struct SimBuffer {
  int32_t* p = nullptr;
  size_t count = 0;
  explicit SimBuffer(size_t n) : count(n) {
    void* raw = nullptr;
    EXPECT_EQ(hc_sim_malloc(&raw, n * sizeof(int32_t), HC_SIM_NVIDIA, 0), HC_OK);
    p = static_cast<int32_t*>(raw);
  }
  ~SimBuffer() { free(); }
  void free() {
    if (p != nullptr) {
      EXPECT_EQ(hc_sim_free(p), HC_OK);
    }
    p = nullptr;
  }
  size_t bytes() const { return count * sizeof(int32_t); }
};

// Rank r's seeded values; the sum is computed here from the same seeds.
std::vector<int32_t> seeded(uint32_t seed, size_t count) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> d(-1000, 1000);
  std::vector<int32_t> v(count);
  for (int32_t& x : v) x = d(gen);
  return v;
}

class RegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comms_.assign(kRanks, nullptr);
    ASSERT_EQ(hc_comm_init_all(comms_.data(), kRanks, nullptr), HC_OK)
        << hc_get_last_error(nullptr);
  }
  void TearDown() override {
    for (hc_comm_t c : comms_) {
      if (c == nullptr) continue;
      EXPECT_EQ(hc_comm_finalize(c), HC_OK) << hc_get_last_error(c);
      EXPECT_EQ(hc_comm_destroy(c), HC_OK);
    }
  }

  // In-place allreduce of bufs[r] over the ranks (one thread, one group), each filled with
  // seeded(seed + r); returns how many elements differ from the sum computed here.
  size_t allreduceWrong(const std::vector<SimBuffer*>& bufs, uint32_t seed) {
    const size_t count = bufs[0]->count;
    std::vector<int64_t> want(count, 0);
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<int32_t> v = seeded(seed + static_cast<uint32_t>(r), count);
      for (size_t k = 0; k < count; ++k) {
        bufs[static_cast<size_t>(r)]->p[k] = v[k];
        want[k] += v[k];
      }
    }
    std::vector<hc_request_t> reqs(kRanks, nullptr);
    EXPECT_EQ(hc_group_start(), HC_OK);
    for (int r = 0; r < kRanks; ++r) {
      int32_t* b = bufs[static_cast<size_t>(r)]->p;
      EXPECT_EQ(hc_allreduce(b, b, count, HC_INT32, HC_SUM, comms_[static_cast<size_t>(r)], nullptr,
                             &reqs[static_cast<size_t>(r)]),
                HC_OK)
          << hc_get_last_error(comms_[static_cast<size_t>(r)]);
    }
    EXPECT_EQ(hc_group_end(), HC_OK) << hc_get_last_error(nullptr);
    size_t wrong = 0;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(hc_wait(&reqs[static_cast<size_t>(r)]), HC_OK)
          << hc_get_last_error(comms_[static_cast<size_t>(r)]);
      for (size_t k = 0; k < count; ++k) wrong += bufs[static_cast<size_t>(r)]->p[k] != want[k];
    }
    return wrong;
  }

  std::vector<hc_comm_t> comms_;
};

TEST_F(RegistrationTest, RegistrationImportsAndOperationsImportNothingMore) {
  SimBuffer a(16384), b(16384);
  const Imports before = imports();
  void* ha = nullptr;
  void* hb = nullptr;
  ASSERT_EQ(hc_comm_register(comms_[0], a.p, a.bytes(), &ha), HC_OK) << hc_get_last_error(nullptr);
  ASSERT_EQ(hc_comm_register(comms_[1], b.p, b.bytes(), &hb), HC_OK) << hc_get_last_error(nullptr);
  const Imports registered = imports();
  EXPECT_EQ(registered.imports - before.imports, 2);
  EXPECT_EQ(registered.bytes - before.bytes, static_cast<double>(a.bytes() + b.bytes()));
  for (uint32_t seed = 1; seed <= 3; ++seed) EXPECT_EQ(allreduceWrong({&a, &b}, seed * 10), 0u);
  EXPECT_EQ(imports().imports, registered.imports) << "an operation imported again";
  EXPECT_EQ(hc_comm_deregister(comms_[0], ha), HC_OK);
  EXPECT_EQ(hc_comm_deregister(comms_[1], hb), HC_OK);
  a.free();
  b.free();
  const Imports freed = imports();
  EXPECT_EQ(freed.releases - registered.releases, 2);
  EXPECT_EQ(freed.bytes, before.bytes);
}

TEST_F(RegistrationTest, FreedAndReallocatedMemoryNeverGivesStaleResults) {
  const Imports before = imports();
  int reused = 0;
  uintptr_t lastA = 0;
  for (uint32_t round = 0; round < 6; ++round) {
    SimBuffer a(8191), b(8191);
    reused += reinterpret_cast<uintptr_t>(a.p) == lastA;
    lastA = reinterpret_cast<uintptr_t>(a.p);
    EXPECT_EQ(allreduceWrong({&a, &b}, 100 + round * 7), 0u) << "round " << round;
    a.free();
    b.free();
    const Imports now = imports();
    EXPECT_EQ(now.bytes, before.bytes) << "round " << round << ": the free left an import";
    EXPECT_EQ(now.imports - before.imports, 2.0 * (round + 1));
    EXPECT_EQ(now.releases - before.releases, 2.0 * (round + 1));
  }
  RecordProperty("rounds_at_a_reused_address", reused);
}

TEST_F(RegistrationTest, PastTheCapLeastRecentlyUsedRegionsGoAndResultsStayRight) {
  // Four pairs of 1 MiB buffers in turn: at most four buffers fit under the 4 MiB cap.
  std::vector<std::unique_ptr<SimBuffer>> bufs;
  for (int i = 0; i < 8; ++i) bufs.push_back(std::make_unique<SimBuffer>((1u << 20) / 4));
  const Imports before = imports();
  size_t wrong = 0;
  for (uint32_t round = 0; round < 3; ++round) {
    for (size_t pair = 0; pair < 4; ++pair) {
      wrong += allreduceWrong({bufs[2 * pair].get(), bufs[2 * pair + 1].get()},
                              round * 100 + static_cast<uint32_t>(pair));
      EXPECT_LE(imports().bytes, static_cast<double>(kCap));
    }
  }
  EXPECT_EQ(wrong, 0u);
  const Imports after = imports();
  EXPECT_GT(after.releases, before.releases) << "nothing was released at the cap";
  bufs.clear();
  EXPECT_EQ(imports().bytes, before.bytes);
}

TEST_F(RegistrationTest, DeregisteringDuringAnOperationLeavesItIntact) {
  SimBuffer a(65536), b(65536);  // 256 KiB each
  SimBuffer big((kCap - 2 * a.bytes()) / sizeof(int32_t) + 1024);
  void* ha = nullptr;
  void* hb = nullptr;
  ASSERT_EQ(hc_comm_register(comms_[0], a.p, a.bytes(), &ha), HC_OK);
  ASSERT_EQ(hc_comm_register(comms_[1], b.p, b.bytes(), &hb), HC_OK);
  const std::vector<int32_t> va = seeded(7, a.count), vb = seeded(8, b.count);
  std::copy(va.begin(), va.end(), a.p);
  std::copy(vb.begin(), vb.end(), b.p);
  // Rank 0's operation waits in the daemon for rank 1's while its buffer is deregistered and
  // the cap presses: only rank 1's idle buffer may be released to make room.
  hc_request_t r0 = nullptr, r1 = nullptr;
  ASSERT_EQ(hc_allreduce(a.p, a.p, a.count, HC_INT32, HC_SUM, comms_[0], nullptr, &r0), HC_OK);
  ASSERT_EQ(hc_comm_deregister(comms_[0], ha), HC_OK);
  ASSERT_EQ(hc_comm_deregister(comms_[1], hb), HC_OK);
  void* hbig = nullptr;
  ASSERT_EQ(hc_comm_register(comms_[1], big.p, big.bytes(), &hbig), HC_OK)
      << hc_get_last_error(nullptr);
  ASSERT_EQ(hc_comm_deregister(comms_[1], hbig), HC_OK);
  ASSERT_EQ(hc_allreduce(b.p, b.p, b.count, HC_INT32, HC_SUM, comms_[1], nullptr, &r1), HC_OK)
      << hc_get_last_error(comms_[1]);
  ASSERT_EQ(hc_wait(&r0), HC_OK) << hc_get_last_error(comms_[0]);
  ASSERT_EQ(hc_wait(&r1), HC_OK) << hc_get_last_error(comms_[1]);
  size_t wrong = 0;
  for (size_t k = 0; k < a.count; ++k) {
    wrong += a.p[k] != va[k] + vb[k];
    wrong += b.p[k] != va[k] + vb[k];
  }
  EXPECT_EQ(wrong, 0u);
}

TEST_F(RegistrationTest, HostMemoryIsAHandleOnlyAndBadHandlesAreRefused) {
  const Imports before = imports();
  void* segment = nullptr;
  ASSERT_EQ(hc_mem_alloc(&segment, 4096), HC_OK);
  std::vector<char> plain(4096);
  void* hs = nullptr;
  void* hp = nullptr;
  EXPECT_EQ(hc_comm_register(comms_[0], segment, 4096, &hs), HC_OK) << hc_get_last_error(nullptr);
  EXPECT_EQ(hc_comm_register(comms_[0], plain.data(), plain.size(), &hp), HC_OK);
  EXPECT_EQ(imports().imports, before.imports);
  EXPECT_EQ(hc_comm_deregister(comms_[1], hs), HC_INVALID_ARGUMENT) << "another comm's handle";
  EXPECT_EQ(hc_comm_deregister(comms_[0], hs), HC_OK);
  EXPECT_EQ(hc_comm_deregister(comms_[0], hs), HC_INVALID_ARGUMENT) << "deregistered twice";
  EXPECT_EQ(hc_comm_deregister(comms_[0], plain.data()), HC_INVALID_ARGUMENT) << "not a handle";
  EXPECT_EQ(hc_comm_deregister(comms_[0], hp), HC_OK);
  void* h = nullptr;
  EXPECT_EQ(hc_comm_register(comms_[0], nullptr, 4, &h), HC_INVALID_ARGUMENT);
  EXPECT_EQ(hc_comm_register(comms_[0], plain.data(), 0, &h), HC_INVALID_ARGUMENT);
  EXPECT_EQ(hc_comm_register(comms_[0], plain.data(), 4, nullptr), HC_INVALID_ARGUMENT);
  SimBuffer d(1024);
  EXPECT_EQ(hc_comm_register(comms_[0], d.p + 1, d.bytes(), &h), HC_INVALID_ARGUMENT)
      << "past the allocation's end";
  EXPECT_EQ(hc_mem_free(segment), HC_OK);
}

}  // namespace
}  // namespace hc::integ
