// The 128-byte unique id: round trips, the layout the client already writes, and refusal of
// anything encodeUniqueId could not have made.
#include "daemon/peer/unique_id.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hc::peer {
namespace {

using ::testing::HasSubstr;

UniqueId sampleId(std::string address) {
  UniqueId id;
  id.rootAddress = std::move(address);
  for (size_t i = 0; i < id.key.size(); ++i) id.key[i] = static_cast<uint8_t>(0xa0 + i);
  return id;
}

class UniqueIdRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UniqueIdRoundTripTest, DecodesToWhatWasEncoded) {
  UniqueId id = sampleId(GetParam());
  Result<UniqueIdBytes> bytes = encodeUniqueId(id);
  ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
  Result<UniqueId> back = decodeUniqueId(bytes.value());
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back.value(), id);
}

INSTANTIATE_TEST_SUITE_P(Addresses, UniqueIdRoundTripTest,
                         ::testing::Values("10.0.0.1:7450", "[fe80::1]:1", "[::1]:65535",
                                           "node-7.cluster.example:7450", "",
                                           std::string(kMaxRootAddressBytes - 5, 'h') + ":7450"));

TEST(UniqueIdTest, LayoutMatchesTheClientsIds) {
  Result<UniqueIdBytes> bytes = encodeUniqueId(sampleId("10.0.0.1:7450"));
  ASSERT_TRUE(bytes.isOk());
  const UniqueIdBytes& b = bytes.value();
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "HCID");
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(b[5] | b[6] | b[7], 0);
  EXPECT_EQ(b[8], 0xa0);
  EXPECT_EQ(b[23], 0xaf);
  EXPECT_EQ(b[24], 13);
  EXPECT_EQ(std::string(b.begin() + 25, b.begin() + 38), "10.0.0.1:7450");
}

TEST(UniqueIdTest, MakeGivesFreshKeysAndChecksTheAddress) {
  Result<UniqueId> a = makeUniqueId("127.0.0.1:1");
  Result<UniqueId> b = makeUniqueId("127.0.0.1:1");
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_NE(a->key, b->key);
  EXPECT_EQ(makeUniqueId("no-port").status().code(), Code::InvalidArgument);
}

TEST(UniqueIdTest, AddressTooLongForTheIdIsRefused) {
  Result<UniqueIdBytes> bytes =
      encodeUniqueId(sampleId(std::string(kMaxRootAddressBytes, 'h') + ":1"));
  EXPECT_EQ(bytes.status().code(), Code::InvalidArgument);
}

// Each case corrupts a valid id in one way.
struct Corruption {
  const char* name;
  std::function<void(UniqueIdBytes&)> apply;
  const char* expected;
};

class UniqueIdMalformedTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(UniqueIdMalformedTest, IsRefusedWithAReason) {
  Result<UniqueIdBytes> bytes = encodeUniqueId(sampleId("10.0.0.1:7450"));
  ASSERT_TRUE(bytes.isOk());
  UniqueIdBytes b = bytes.value();
  GetParam().apply(b);
  Result<UniqueId> decoded = decodeUniqueId(b);
  ASSERT_FALSE(decoded.isOk());
  EXPECT_EQ(decoded.status().code(), Code::InvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr(GetParam().expected));
}

void setAddress(UniqueIdBytes& b, const std::string& address) {
  std::fill(b.begin() + 24, b.end(), 0);
  b[24] = static_cast<uint8_t>(address.size());
  std::copy(address.begin(), address.end(), b.begin() + 25);
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, UniqueIdMalformedTest,
    ::testing::Values(
        Corruption{"BadMagic", [](UniqueIdBytes& b) { b[0] = 'X'; }, "bad magic"},
        Corruption{"NewerVersion", [](UniqueIdBytes& b) { b[4] = 2; }, "version 2"},
        Corruption{"LengthPastTheEnd", [](UniqueIdBytes& b) { b[24] = 104; }, "length 104"},
        Corruption{"TrailingGarbage", [](UniqueIdBytes& b) { b[127] = 1; }, "after the root"},
        Corruption{"Truncated", [](UniqueIdBytes& b) { b[24] = 5; }, "after the root"},
        Corruption{"NoPort", [](UniqueIdBytes& b) { setAddress(b, "10.0.0.1"); }, "no :port"},
        Corruption{"PortZero", [](UniqueIdBytes& b) { setAddress(b, "h:0"); }, "port"},
        Corruption{"PortTooBig", [](UniqueIdBytes& b) { setAddress(b, "h:70000"); }, "port"},
        Corruption{"PortNotNumber", [](UniqueIdBytes& b) { setAddress(b, "h:7x"); }, "port"},
        Corruption{"BareIpv6", [](UniqueIdBytes& b) { setAddress(b, "fe80::1:5"); }, "bad host"},
        Corruption{"Space", [](UniqueIdBytes& b) { setAddress(b, "a b:1"); }, "bad host"},
        Corruption{"ControlByte", [](UniqueIdBytes& b) { setAddress(b, "a\x01:1"); }, "bad host"},
        Corruption{"EmptyHost", [](UniqueIdBytes& b) { setAddress(b, ":1"); }, "bad host"}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return info.param.name; });

TEST(UniqueIdTest, WrongSizeIsRefused) {
  std::vector<uint8_t> shortId(127, 0);
  EXPECT_THAT(decodeUniqueId(shortId).status().message(), HasSubstr("not 127"));
}

}  // namespace
}  // namespace hc::peer
