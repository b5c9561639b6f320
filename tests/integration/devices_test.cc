// hc_get_devices against a daemon with one simulated NVIDIA and one simulated AMD device: what the
// client reports, how it treats its arguments, and DeviceQuery frames sent by hand (an index out
// of range is an Error on a connection that stays usable). libhcclient keeps one connection per
// process, so one daemon serves every test of this executable.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/ipc/frames.h"
#include "hetero_comm/hc.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

constexpr uint64_t kSimMemory = 3ull << 30;
constexpr auto kMeasureLimit = std::chrono::seconds(10);

DaemonProcess* gDaemon = nullptr;

class SimDevicesDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string error;
    daemon_ =
        DaemonProcess::start({"--set", "devices.sim.nvidia=1", "--set", "devices.sim.amd=1",
                              "--set", "devices.sim.memory_bytes=" + std::to_string(kSimMemory)},
                             &error);
    ASSERT_NE(daemon_, nullptr) << error;
    ::setenv("HC_SOCKET", daemon_->socketPath().c_str(), 1);
    gDaemon = daemon_.get();
  }
  void TearDown() override {
    gDaemon = nullptr;
    daemon_.reset();
  }

 private:
  std::unique_ptr<DaemonProcess> daemon_;
};

[[maybe_unused]] ::testing::Environment* const kDaemon =
    ::testing::AddGlobalTestEnvironment(new SimDevicesDaemon);

// A row no daemon sends, to see what a call left alone.
hc_device_info_t sentinel() {
  hc_device_info_t d;
  std::memset(&d, 0x5a, sizeof(d));
  return d;
}

bool untouched(const hc_device_info_t& d) {
  hc_device_info_t s = sentinel();
  return std::memcmp(&d, &s, sizeof(d)) == 0;
}

TEST(GetDevicesTest, ListsBothSimDevicesInOrder) {
  std::vector<hc_device_info_t> rows(4, sentinel());
  int count = -1;
  ASSERT_EQ(hc_get_devices(rows.data(), 4, &count), HC_OK) << hc_get_last_error(nullptr);
  ASSERT_EQ(count, 2);
  EXPECT_STREQ(rows[0].id, "sim-nvidia:0");
  EXPECT_STREQ(rows[1].id, "sim-amd:0");
  EXPECT_STREQ(rows[0].vendor, "nvidia");
  EXPECT_STREQ(rows[1].vendor, "amd");
  for (int i = 0; i < 2; ++i) {
    EXPECT_STREQ(rows[i].backend, "sim");
    EXPECT_EQ(rows[i].memory_bytes, kSimMemory);
    EXPECT_STREQ(rows[i].pci_bus_id, "");  // simulated: not on PCI
    EXPECT_TRUE(rows[i].measured == 0 || rows[i].measured == 1);
    EXPECT_GE(rows[i].weight, 0.0);
    EXPECT_LE(rows[i].weight, 1.0);
  }
  EXPECT_TRUE(untouched(rows[2]) && untouched(rows[3])) << "wrote past the node's devices";
}

TEST(GetDevicesTest, CapacityZeroLearnsTheCountAndWritesNothing) {
  int count = -1;
  ASSERT_EQ(hc_get_devices(nullptr, 0, &count), HC_OK) << hc_get_last_error(nullptr);
  EXPECT_EQ(count, 2);
  hc_device_info_t row = sentinel();
  count = -1;
  ASSERT_EQ(hc_get_devices(&row, 0, &count), HC_OK) << hc_get_last_error(nullptr);
  EXPECT_EQ(count, 2);
  EXPECT_TRUE(untouched(row));
}

TEST(GetDevicesTest, CapacityOneFillsTheFirstOnly) {
  hc_device_info_t rows[2] = {sentinel(), sentinel()};
  int count = -1;
  ASSERT_EQ(hc_get_devices(rows, 1, &count), HC_OK) << hc_get_last_error(nullptr);
  EXPECT_EQ(count, 2);
  EXPECT_STREQ(rows[0].id, "sim-nvidia:0");
  EXPECT_TRUE(untouched(rows[1]));
}

TEST(GetDevicesTest, RefusesBadArgumentsAndWritesNothing) {
  hc_device_info_t row = sentinel();
  int count = -7;
  EXPECT_EQ(hc_get_devices(&row, 1, nullptr), HC_INVALID_ARGUMENT);
  EXPECT_EQ(hc_get_devices(&row, -1, &count), HC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hc_get_last_error(nullptr)).find("capacity"), std::string::npos);
  EXPECT_EQ(hc_get_devices(nullptr, 1, &count), HC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hc_get_last_error(nullptr)).find("devices is NULL"), std::string::npos);
  EXPECT_EQ(count, -7);
  EXPECT_TRUE(untouched(row));
}

// The figures themselves are the daemon's tests' business; here they only have to arrive whole.
TEST(GetDevicesTest, WeightsArriveOnceMeasured) {
  const auto deadline = std::chrono::steady_clock::now() + kMeasureLimit;
  hc_device_info_t rows[2];
  int count = 0;
  for (;;) {
    ASSERT_EQ(hc_get_devices(rows, 2, &count), HC_OK) << hc_get_last_error(nullptr);
    ASSERT_EQ(count, 2);
    if (rows[0].measured && rows[1].measured) break;
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL() << "not measured within 10 s: '" << rows[0].note << "', '" << rows[1].note
                   << "'";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const auto& d : rows) {
    EXPECT_GT(d.weight, 0.0) << d.id;
    EXPECT_LE(d.weight, 1.0) << d.id;
    EXPECT_GT(d.rate_gbps, 0.0) << d.id;
    EXPECT_GT(d.h2d_gbps, 0.0) << d.id;
    EXPECT_GT(d.d2h_gbps, 0.0) << d.id;
    EXPECT_GT(d.reduce_gbps, 0.0) << d.id;
  }
  EXPECT_DOUBLE_EQ(std::max(rows[0].weight, rows[1].weight), 1.0);
}

// One DeviceQuery by hand: the reply frame, or the Error frame's status and text.
struct RawAnswer {
  ipc::FrameType type{};
  ipc::DeviceQueryReplyFrame reply{};
  ipc::ErrorFrame error{};
  uint32_t requestId = 0;  // as the answer names it (a refusal that ends the connection: 0)
};

Result<RawAnswer> rawQuery(RawClient& client, uint32_t index, uint32_t requestId) {
  auto f = ipc::makeFrame<ipc::DeviceQueryFrame>(ipc::FrameType::DeviceQuery, requestId);
  f.index = index;
  HC_RETURN_IF_ERROR(client.send(ipc::frameBytes(f)));
  auto msg = client.receive();
  if (!msg.isOk()) return msg.status();
  auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
  if (!type.isOk()) return type.status();
  RawAnswer a;
  a.type = *type;
  if (*type == ipc::FrameType::DeviceQueryReply) {
    a.reply = ipc::frameAs<ipc::DeviceQueryReplyFrame>(msg->bytes);
  } else if (*type == ipc::FrameType::Error) {
    a.error = ipc::frameAs<ipc::ErrorFrame>(msg->bytes);
  }
  a.requestId = ipc::frameAs<ipc::FrameHeader>(msg->bytes).requestId;
  return a;
}

TEST(DeviceQueryFrameTest, OutOfRangeIsAnErrorAndTheConnectionStaysUsable) {
  ASSERT_NE(gDaemon, nullptr);
  auto client = RawClient::connect(gDaemon->socketPath());
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  ASSERT_TRUE(client->handshake().isOk());

  auto first = rawQuery(*client, 1, 10);
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  ASSERT_EQ(first->type, ipc::FrameType::DeviceQueryReply);
  EXPECT_EQ(first->requestId, 10u);
  EXPECT_EQ(first->reply.total, 2u);
  EXPECT_EQ(first->reply.index, 1u);
  EXPECT_STREQ(first->reply.device.id, "sim-amd:0");

  for (uint32_t index : {2u, 3u, 4096u, 0xffffffffu}) {
    auto bad = rawQuery(*client, index, 20 + index % 1000);
    ASSERT_TRUE(bad.isOk()) << index << ": " << bad.status().toString();
    ASSERT_EQ(bad->type, ipc::FrameType::Error) << index;
    EXPECT_EQ(bad->requestId, 20 + index % 1000) << index;
    EXPECT_EQ(bad->error.status, static_cast<int32_t>(Code::InvalidArgument)) << index;
    EXPECT_NE(std::string(bad->error.message).find("out of range"), std::string::npos)
        << bad->error.message;
  }

  // The same connection goes on: the refusal was an answer, not a protocol violation.
  auto again = rawQuery(*client, 0, 30);
  ASSERT_TRUE(again.isOk()) << again.status().toString() << "\n" << gDaemon->logTail();
  ASSERT_EQ(again->type, ipc::FrameType::DeviceQueryReply);
  EXPECT_STREQ(again->reply.device.id, "sim-nvidia:0");
  EXPECT_TRUE(gDaemon->running());
  Status serves = checkDaemonServes(gDaemon->socketPath());
  EXPECT_TRUE(serves.isOk()) << serves.toString() << "\n" << gDaemon->logTail();
}

TEST(DeviceQueryFrameTest, BeforeHelloIsRefused) {
  ASSERT_NE(gDaemon, nullptr);
  auto client = RawClient::connect(gDaemon->socketPath());
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  auto answer = rawQuery(*client, 0, 1);
  ASSERT_TRUE(answer.isOk()) << answer.status().toString();
  EXPECT_EQ(answer->type, ipc::FrameType::Error);
  EXPECT_TRUE(client->waitClosed());
  EXPECT_TRUE(gDaemon->running());
}

}  // namespace
}  // namespace hc::integ
