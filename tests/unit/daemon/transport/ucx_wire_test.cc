// UCX backend, pure parts: the UCX tag layout, control messages and addresses (ucx_wire.h), and
// NCCL_SOCKET_IFNAME selection (socket_ifname.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/transport/ucx/socket_ifname.h"
#include "daemon/transport/ucx/ucx_wire.h"

namespace hc::transport::ucx {
namespace {

TEST(UcxWireTest, TagFieldsRoundTripAndNeverOverlap) {
  const uint64_t control = controlTag(kMaxStamp, 0xabcdef1234ull);
  EXPECT_TRUE(control & kControlBit);
  EXPECT_EQ(stampOf(control), kMaxStamp);
  EXPECT_EQ(sequenceOf(control), 0xabcdef1234ull);
  const uint64_t data = dataTag(5, 77);
  EXPECT_FALSE(data & kControlBit);
  EXPECT_EQ(stampOf(data), 5u);
  EXPECT_EQ(sequenceOf(data), 77u);
  EXPECT_EQ(kControlBit | kStampMask | kSequenceMask, ~0ull);
  EXPECT_EQ(kControlBit & kStampMask, 0u);
  EXPECT_EQ(kStampMask & kSequenceMask, 0u);
  // The sequence wraps inside its field instead of spilling into the stamp.
  EXPECT_EQ(stampOf(dataTag(5, kSequenceMask + 3)), 5u);
  EXPECT_EQ(sequenceOf(dataTag(5, kSequenceMask + 3)), 2u);
}

std::vector<uint8_t> bytesOf(const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

TEST(UcxWireTest, ParsesWhatItSendsAndRejectsTheRest) {
  HelloMessage hello;
  hello.stamp = 42;
  hello.uuid = 0x1122334455667788ull;
  auto parsed = parseControl(bytesOf(&hello, sizeof(hello)));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, ControlKind::Hello);
  EXPECT_EQ(parsed->hello.stamp, 42u);
  EXPECT_EQ(parsed->hello.uuid, hello.uuid);

  MessageHeader header;
  header.kind = ControlKind::Inline;
  header.tag = ~0ull;
  header.bytes = 3;
  std::vector<uint8_t> inlineMessage = bytesOf(&header, sizeof(header));
  inlineMessage.insert(inlineMessage.end(), {7, 8, 9});
  parsed = parseControl(inlineMessage);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->header.tag, ~0ull);
  EXPECT_EQ(std::vector<uint8_t>(parsed->payload.begin(), parsed->payload.end()),
            (std::vector<uint8_t>{7, 8, 9}));

  inlineMessage.pop_back();  // payload shorter than announced
  EXPECT_FALSE(parseControl(inlineMessage));
  header.kind = ControlKind::Header;
  header.bytes = 1 << 30;
  EXPECT_TRUE(parseControl(bytesOf(&header, sizeof(header))));
  std::vector<uint8_t> trailing = bytesOf(&header, sizeof(header));
  trailing.push_back(0);  // a header carries no payload
  EXPECT_FALSE(parseControl(trailing));
  header.version = kWireVersion + 1;
  EXPECT_FALSE(parseControl(bytesOf(&header, sizeof(header))));
  header.version = kWireVersion;
  header.kind = static_cast<ControlKind>(99);
  EXPECT_FALSE(parseControl(bytesOf(&header, sizeof(header))));
  EXPECT_FALSE(parseControl(std::vector<uint8_t>(8, 0)));
}

TEST(UcxWireTest, AddressesRoundTripAndForeignBytesAreRejected) {
  const std::vector<uint8_t> worker = {1, 2, 3, 4, 5};
  std::vector<uint8_t> address = encodeAddress(99, worker);
  auto decoded = decodeAddress(address);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->uuid, 99u);
  EXPECT_EQ(std::vector<uint8_t>(decoded->worker.begin(), decoded->worker.end()), worker);

  EXPECT_FALSE(decodeAddress(encodeAddress(0, worker)));  // uuid 0 is never valid
  EXPECT_FALSE(decodeAddress(encodeAddress(99, {})));     // no worker address
  std::vector<uint8_t> wrongMagic = address;
  wrongMagic[0] ^= 1;
  EXPECT_FALSE(decodeAddress(wrongMagic));
  EXPECT_FALSE(decodeAddress(std::vector<uint8_t>{1, 2, 3}));
  // A loopback address (fabric id + endpoint id) is not one either.
  EXPECT_FALSE(decodeAddress(std::vector<uint8_t>(12, 0)));
}

const std::vector<std::string> kInterfaces = {"lo", "eth0", "eth1", "docker0", "ib0"};

std::vector<std::string> select(const std::string& spec) {
  auto chosen = selectInterfaces(spec, kInterfaces);
  return chosen.isOk() ? *chosen : std::vector<std::string>{"<" + chosen.status().message() + ">"};
}

TEST(SocketIfnameTest, FollowsNcclSyntax) {
  using V = std::vector<std::string>;
  EXPECT_EQ(select("eth"), (V{"eth0", "eth1"}));
  EXPECT_EQ(select("eth,ib"), (V{"eth0", "eth1", "ib0"}));
  EXPECT_EQ(select("=eth0"), (V{"eth0"}));
  EXPECT_EQ(select("=eth"), (V{"<socket interface spec \"=eth\" selects none of "
                               "[lo,eth0,eth1,docker0,ib0]>"}));
  EXPECT_EQ(select("^docker"), (V{"lo", "eth0", "eth1", "ib0"}));
  EXPECT_EQ(select("^docker,lo"), (V{"eth0", "eth1", "ib0"}));
  EXPECT_EQ(select("^=eth0"), (V{"lo", "eth1", "docker0", "ib0"}));
  EXPECT_EQ(select("lo,,"), (V{"lo"}));
  EXPECT_FALSE(selectInterfaces("", kInterfaces).isOk());
  EXPECT_FALSE(selectInterfaces("^", {}).isOk());
  EXPECT_EQ(selectInterfaces("wlan", kInterfaces).status().code(), Code::InvalidArgument);
}

TEST(SocketIfnameTest, ResolvesOnThisHostAndKeepsRdmaPorts) {
  auto interfaces = listNetworkInterfaces();
  ASSERT_TRUE(interfaces.isOk()) << interfaces.status().toString();
  EXPECT_NE(std::find(interfaces->begin(), interfaces->end(), "lo"), interfaces->end());
  auto devices = netDevicesFor("=lo");
  ASSERT_TRUE(devices.isOk());
  std::string expected = "lo";
  for (const std::string& port : listRdmaPorts()) expected += "," + port;  // none on this VM
  EXPECT_EQ(*devices, expected);
  EXPECT_EQ(netDevicesFor("=no-such-interface0").status().code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc::transport::ucx
