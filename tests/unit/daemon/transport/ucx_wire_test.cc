// UCX backend, pure parts: the UCX tag layout, control messages and addresses (ucx_wire.h), and
// NCCL_SOCKET_IFNAME selection (socket_ifname.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
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

constexpr Secret kSecret = {0x5e, 0xc7, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xff};

std::vector<uint8_t> bytesOf(const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

TEST(UcxWireTest, HelloRoundTripsAtTheWireVersionOnly) {
  HelloMessage hello;
  hello.stamp = 42;
  hello.uuid = 0x1122334455667788ull;
  hello.secret = kSecret;
  EXPECT_EQ(hello.version, kWireVersion);
  EXPECT_EQ(hello.flags, 0u);
  auto parsed = parseControl(bytesOf(&hello, sizeof(hello)));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, ControlKind::Hello);
  EXPECT_EQ(parsed->hello.stamp, 42u);
  EXPECT_EQ(parsed->hello.uuid, hello.uuid);
  EXPECT_EQ(parsed->hello.secret, kSecret);
  // The flag byte was the reserved one: earlier daemons sent 0 and read nothing from it.
  EXPECT_EQ(offsetof(HelloMessage, flags), 3u);
  hello.flags = kHelloWantsHello | 0x80;  // a bit this version does not know is carried, unread
  parsed = parseControl(bytesOf(&hello, sizeof(hello)));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->hello.flags, kHelloWantsHello | 0x80);
  hello.version = 1;  // the version whose tags had 16 identity bits
  EXPECT_FALSE(parseControl(bytesOf(&hello, sizeof(hello))));
  hello.version = kWireVersion + 1;
  EXPECT_FALSE(parseControl(bytesOf(&hello, sizeof(hello))));
}

TEST(UcxWireTest, HeaderCarriesTheWholeTagAndItsOwnLength) {
  const Tag tag = makeTag(~0ull - 1, 0x8000000000000001ull, 0xfffffffeu);
  const MessageHeader header = makeHeader(ControlKind::Inline, tag, 3, kSecret);
  EXPECT_EQ(header.version, kWireVersion);
  EXPECT_EQ(header.headerBytes, sizeof(MessageHeader));
  std::vector<uint8_t> inlineMessage = bytesOf(&header, sizeof(header));
  inlineMessage.insert(inlineMessage.end(), {7, 8, 9});
  auto parsed = parseControl(inlineMessage);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, ControlKind::Inline);
  EXPECT_EQ(tagOf(parsed->header), tag);
  EXPECT_EQ(parsed->header.bytes, 3u);
  EXPECT_EQ(parsed->header.secret, kSecret);
  EXPECT_EQ(std::vector<uint8_t>(parsed->payload.begin(), parsed->payload.end()),
            (std::vector<uint8_t>{7, 8, 9}));

  const MessageHeader large = makeHeader(ControlKind::Header, tag, 1 << 30, kSecret);
  parsed = parseControl(bytesOf(&large, sizeof(large)));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, ControlKind::Header);
  EXPECT_EQ(tagOf(parsed->header), tag);
  EXPECT_EQ(parsed->header.bytes, 1u << 30);
  EXPECT_TRUE(parsed->payload.empty());
}

TEST(UcxWireTest, ReadsTheFieldsItKnowsOfALongerHeader) {
  // A later version's header: this version's fields, more fields, then the inline payload.
  MessageHeader header = makeHeader(ControlKind::Inline, makeTag(0x20001, 5, 2), 2, kSecret);
  header.headerBytes = sizeof(MessageHeader) + 16;
  std::vector<uint8_t> message = bytesOf(&header, sizeof(header));
  message.resize(header.headerBytes, 0xaa);  // fields this version does not know
  message.insert(message.end(), {1, 2});
  auto parsed = parseControl(message);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(tagOf(parsed->header), makeTag(0x20001, 5, 2));
  EXPECT_EQ(std::vector<uint8_t>(parsed->payload.begin(), parsed->payload.end()),
            (std::vector<uint8_t>{1, 2}));
  // A Header kind may be longer too, and still carries nothing after itself.
  header.kind = ControlKind::Header;
  header.bytes = 1 << 20;
  message = bytesOf(&header, sizeof(header));
  message.resize(kMaxHeaderBytes, 0);
  header.headerBytes = kMaxHeaderBytes;
  std::memcpy(message.data(), &header, sizeof(header));
  parsed = parseControl(message);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->header.bytes, 1u << 20);
}

TEST(UcxWireTest, RefusesWhatIsNotAMessageOfThisVersion) {
  const MessageHeader good = makeHeader(ControlKind::Inline, makeTag(1, 2, 3), 3, kSecret);
  auto message = [](const MessageHeader& header, const std::vector<uint8_t>& tail) {
    std::vector<uint8_t> bytes(sizeof(header) + tail.size());
    std::memcpy(bytes.data(), &header, sizeof(header));
    std::copy(tail.begin(), tail.end(), bytes.begin() + sizeof(header));
    return bytes;
  };
  ASSERT_TRUE(parseControl(message(good, {7, 8, 9})));
  EXPECT_FALSE(parseControl(message(good, {7, 8})));        // shorter payload than announced
  EXPECT_FALSE(parseControl(message(good, {7, 8, 9, 0})));  // longer
  MessageHeader header = good;
  header.version = 1;
  EXPECT_FALSE(parseControl(message(header, {7, 8, 9})));
  header.version = kWireVersion + 1;
  EXPECT_FALSE(parseControl(message(header, {7, 8, 9})));
  header = good;
  header.headerBytes = sizeof(MessageHeader) - 8;  // would put the payload inside the header
  EXPECT_FALSE(parseControl(message(header, {7, 8, 9})));
  header.headerBytes = 0;
  EXPECT_FALSE(parseControl(message(header, {7, 8, 9})));
  header.headerBytes = kMaxHeaderBytes + 8;  // past the bound
  EXPECT_FALSE(parseControl(message(header, std::vector<uint8_t>(kMaxHeaderBytes, 0))));
  header.headerBytes = sizeof(MessageHeader) + 8;  // past the message's end
  header.bytes = 0;
  EXPECT_FALSE(parseControl(message(header, {1, 2, 3})));
  header = makeHeader(ControlKind::Header, makeTag(1, 2, 3), 1 << 30, kSecret);
  EXPECT_FALSE(parseControl(message(header, {0})));  // a header carries no payload
  header.kind = static_cast<ControlKind>(99);
  EXPECT_FALSE(parseControl(message(header, {})));
  EXPECT_FALSE(parseControl(std::vector<uint8_t>(8, 0)));
  // Shorter than this version's header, whatever it claims.
  std::vector<uint8_t> cut = message(good, {});
  cut.resize(sizeof(MessageHeader) - 4);
  EXPECT_FALSE(parseControl(cut));
}

TEST(UcxWireTest, AddressesRoundTripAndForeignBytesAreRejected) {
  const std::vector<uint8_t> worker = {1, 2, 3, 4, 5};
  std::vector<uint8_t> address = encodeAddress(99, kSecret, worker);
  auto decoded = decodeAddress(address);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->uuid, 99u);
  EXPECT_EQ(decoded->secret, kSecret);
  EXPECT_EQ(std::vector<uint8_t>(decoded->worker.begin(), decoded->worker.end()), worker);

  EXPECT_FALSE(decodeAddress(encodeAddress(0, kSecret, worker)));  // uuid 0 is never valid
  EXPECT_FALSE(decodeAddress(encodeAddress(99, kSecret, {})));     // no worker address
  std::vector<uint8_t> wrongMagic = address;
  wrongMagic[0] ^= 1;
  EXPECT_FALSE(decodeAddress(wrongMagic));
  EXPECT_FALSE(decodeAddress(std::vector<uint8_t>{1, 2, 3}));
  std::vector<uint8_t> otherVersion = address;
  otherVersion[4] = static_cast<uint8_t>(kWireVersion + 1);  // the version after the magic
  EXPECT_FALSE(decodeAddress(otherVersion));
  // A loopback address (fabric id + endpoint id) is not one either.
  EXPECT_FALSE(decodeAddress(std::vector<uint8_t>(12, 0)));
}

TEST(UcxWireTest, SecretsCompareWhole) {
  EXPECT_TRUE(sameSecret(kSecret, kSecret));
  for (size_t i = 0; i < kSecretBytes; ++i) {
    Secret other = kSecret;
    other[i] ^= 0x01;
    EXPECT_FALSE(sameSecret(kSecret, other)) << "byte " << i;
    other[i] ^= 0x81;
    EXPECT_FALSE(sameSecret(kSecret, other)) << "byte " << i;
  }
  EXPECT_FALSE(sameSecret(kSecret, Secret{}));
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
