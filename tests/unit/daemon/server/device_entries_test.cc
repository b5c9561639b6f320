// What a client reads of a GPU row: every text field fits and ends in its NUL whatever the row
// held, and figures a reply could not carry (negative, not finite) arrive as 0.
#include "daemon/server/device_entries.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "common/ipc/frames.h"

namespace hc::server {
namespace {

discovery::GpuRow simRow() {
  discovery::GpuRow row;
  row.id = "sim-amd:0";
  row.vendor = "amd";
  row.backend = "sim";
  row.model = "hetero-comm simulated GPU";
  row.vramBytes = 16ull << 30;
  row.speed.measured = true;
  row.speed.h2dGBps = 12.5;
  row.speed.d2hGBps = 11.0;
  row.speed.reduceGBps = 40.0;
  row.speed.rateGBps = 5.1;
  row.speed.weight = 0.75;
  return row;
}

TEST(DeviceEntryOfTest, CopiesEveryField) {
  discovery::GpuRow row = simRow();
  row.placement.busId = "0000:3b:00.0";
  row.placement.numaNode = 1;
  ipc::DeviceEntry e = deviceEntryOf(row);
  EXPECT_STREQ(e.id, "sim-amd:0");
  EXPECT_STREQ(e.vendor, "amd");
  EXPECT_STREQ(e.backend, "sim");
  EXPECT_STREQ(e.model, "hetero-comm simulated GPU");
  EXPECT_STREQ(e.pciBusId, "0000:3b:00.0");
  EXPECT_EQ(e.memoryBytes, 16ull << 30);
  EXPECT_EQ(e.numaNode, 1);
  EXPECT_EQ(e.flags, ipc::kDeviceMeasured);
  EXPECT_DOUBLE_EQ(e.weight, 0.75);
  EXPECT_DOUBLE_EQ(e.h2dGBps, 12.5);
  EXPECT_DOUBLE_EQ(e.d2hGBps, 11.0);
  EXPECT_DOUBLE_EQ(e.reduceGBps, 40.0);
  EXPECT_DOUBLE_EQ(e.rateGBps, 5.1);
  EXPECT_STREQ(e.note, "");
}

TEST(DeviceEntryOfTest, UnmeasuredRowKeepsItsNoteAndUnknowns) {
  discovery::GpuRow row;
  row.id = "pci-intel:0";
  row.vendor = "intel";
  row.backend = "none";
  row.speed.note = "no runtime drives this GPU";
  ipc::DeviceEntry e = deviceEntryOf(row);
  EXPECT_EQ(e.flags, 0u);
  EXPECT_EQ(e.numaNode, -1);
  EXPECT_EQ(e.memoryBytes, 0u);
  EXPECT_EQ(e.weight, 0.0);
  EXPECT_STREQ(e.note, "no runtime drives this GPU");
}

TEST(DeviceEntryOfTest, LongTextIsCutAndTerminated) {
  discovery::GpuRow row = simRow();
  row.id = std::string(200, 'i');
  row.vendor = std::string(200, 'v');
  row.backend = std::string(200, 'b');
  row.model = std::string(500, 'm');
  row.placement.busId = std::string(64, 'p');
  row.speed.note = std::string(500, 'n');
  ipc::DeviceEntry e = deviceEntryOf(row);
  EXPECT_EQ(std::string(e.id), std::string(sizeof(e.id) - 1, 'i'));
  EXPECT_EQ(std::string(e.vendor), std::string(sizeof(e.vendor) - 1, 'v'));
  EXPECT_EQ(std::string(e.backend), std::string(sizeof(e.backend) - 1, 'b'));
  EXPECT_EQ(std::string(e.model), std::string(sizeof(e.model) - 1, 'm'));
  EXPECT_EQ(std::string(e.pciBusId), std::string(sizeof(e.pciBusId) - 1, 'p'));
  EXPECT_EQ(std::string(e.note), std::string(sizeof(e.note) - 1, 'n'));
}

// Whatever a row held, the reply built from it passes the client's checks.
TEST(DeviceEntryOfTest, FiguresAReplyCannotCarryBecomeZero) {
  discovery::GpuRow row = simRow();
  row.speed.weight = std::numeric_limits<double>::quiet_NaN();
  row.speed.h2dGBps = std::numeric_limits<double>::infinity();
  row.speed.d2hGBps = -3;
  ipc::DeviceEntry e = deviceEntryOf(row);
  EXPECT_EQ(e.weight, 0.0);
  EXPECT_EQ(e.h2dGBps, 0.0);
  EXPECT_EQ(e.d2hGBps, 0.0);
  EXPECT_DOUBLE_EQ(e.reduceGBps, 40.0);

  auto reply = ipc::makeFrame<ipc::DeviceQueryReplyFrame>(ipc::FrameType::DeviceQueryReply, 1);
  reply.total = 1;
  reply.device = e;
  auto checked = ipc::validateFrame(ipc::frameBytes(reply), 0);
  EXPECT_TRUE(checked.isOk()) << checked.status().toString();
}

TEST(DeviceEntriesOfTest, KeepsTheBoardsOrder) {
  discovery::GpuRow a = simRow();
  a.id = "sim-nvidia:0";
  discovery::GpuRow b = simRow();
  auto entries = deviceEntriesOf({a, b});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_STREQ(entries[0].id, "sim-nvidia:0");
  EXPECT_STREQ(entries[1].id, "sim-amd:0");
  EXPECT_TRUE(deviceEntriesOf({}).empty());
}

}  // namespace
}  // namespace hc::server
