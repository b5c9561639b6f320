// Every frame type must round trip, and every malformed frame must be refused with a message that
// says what is wrong: the daemon parses frames from untrusted local processes.
#include "common/ipc/frames.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hc::ipc {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T, FrameType kType>
struct Kind {
  using Frame = T;
  static constexpr FrameType kFrameType = kType;
};

using AllKinds = ::testing::Types<
    Kind<HelloFrame, FrameType::Hello>, Kind<WelcomeFrame, FrameType::Welcome>,
    Kind<ErrorFrame, FrameType::Error>, Kind<MemAllocFrame, FrameType::MemAlloc>,
    Kind<MemAllocReplyFrame, FrameType::MemAllocReply>, Kind<MemFreeFrame, FrameType::MemFree>,
    Kind<MemFreeReplyFrame, FrameType::MemFreeReply>, Kind<CommAbortFrame, FrameType::CommAbort>,
    Kind<CmaProbeFrame, FrameType::CmaProbe>, Kind<CmaProbeReplyFrame, FrameType::CmaProbeReply>,
    Kind<PeerInfoFrame, FrameType::PeerInfo>, Kind<PeerInfoReplyFrame, FrameType::PeerInfoReply>,
    Kind<CommRootFrame, FrameType::CommRoot>, Kind<CommRootReplyFrame, FrameType::CommRootReply>,
    Kind<DeviceQueryFrame, FrameType::DeviceQuery>,
    Kind<DeviceQueryReplyFrame, FrameType::DeviceQueryReply>,
    Kind<CommAreaFrame, FrameType::CommArea>, Kind<CommAreaReplyFrame, FrameType::CommAreaReply>>;

template <typename T>
Bytes toBytes(const T& frame) {
  auto span = frameBytes(frame);
  return Bytes(span.begin(), span.end());
}

FrameHeader headerOf(const Bytes& b) { return frameAs<FrameHeader>(b); }

void setHeader(Bytes& b, const FrameHeader& h) { std::memcpy(b.data(), &h, sizeof(h)); }

// Expects InvalidArgument whose message contains `needle`.
void expectRejected(const Bytes& b, size_t fds, const std::string& needle) {
  auto r = validateFrame(b, fds);
  ASSERT_FALSE(r.isOk()) << "accepted a malformed frame (expected: " << needle << ")";
  EXPECT_EQ(r.status().code(), Code::InvalidArgument) << r.status().toString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' does not mention '" << needle << "'";
}

template <typename K>
class FrameKindTest : public ::testing::Test {
 protected:
  using Frame = typename K::Frame;
  static constexpr FrameType kType = K::kFrameType;

  Bytes validBytes() const { return toBytes(makeFrame<Frame>(kType, 77)); }
  size_t fds() const { return frameFdCount(kType); }
};
TYPED_TEST_SUITE(FrameKindTest, AllKinds);

TYPED_TEST(FrameKindTest, RoundTripsThroughValidation) {
  using Frame = typename TypeParam::Frame;
  constexpr FrameType kType = TypeParam::kFrameType;
  auto frame = makeFrame<Frame>(kType, 0xdeadbeef);
  EXPECT_EQ(frame.header.magic, kFrameMagic);
  EXPECT_EQ(frame.header.major, kProtocolMajor);
  EXPECT_EQ(frame.header.length, sizeof(Frame));
  EXPECT_EQ(frameSize(kType), sizeof(Frame));
  EXPECT_LE(sizeof(Frame), kMaxFrameBytes);
  // Fill the payload with a pattern (text fields stay terminated) so a copy that drops bytes shows.
  auto* raw = reinterpret_cast<uint8_t*>(&frame);
  for (size_t i = sizeof(FrameHeader); i < sizeof(Frame); ++i) raw[i] = uint8_t(i * 7 + 1);
  if constexpr (std::is_same_v<Frame, HelloFrame>) copyText(frame.clientName, "trainer-0");
  if constexpr (std::is_same_v<Frame, ErrorFrame>) copyText(frame.message, "no such comm");
  if constexpr (std::is_same_v<Frame, PeerInfoReplyFrame>) copyText(frame.address, "10.0.0.1:7710");
  if constexpr (std::is_same_v<Frame, CommRootFrame>) copyText(frame.address, "[fe80::1]:7710");
  if constexpr (std::is_same_v<Frame, CommAreaReplyFrame>) frame.present = 0;  // then no fd
  if constexpr (std::is_same_v<Frame, DeviceQueryReplyFrame>) {
    frame.total = 2;
    frame.index = 1;
    copyText(frame.device.id, "sim-amd:0");
    copyText(frame.device.vendor, "amd");
    copyText(frame.device.backend, "sim");
    copyText(frame.device.model, "hetero-comm simulated GPU");
    copyText(frame.device.pciBusId, "");
    copyText(frame.device.note, "");
    frame.device.weight = 0.5;
    frame.device.h2dGBps = frame.device.d2hGBps = frame.device.reduceGBps = 10;
    frame.device.rateGBps = 3.3;
  }

  // Validate from an unaligned copy: frames arrive in byte buffers.
  Bytes buf(sizeof(Frame) + 1);
  std::memcpy(buf.data() + 1, &frame, sizeof(Frame));
  std::span<const uint8_t> bytes(buf.data() + 1, sizeof(Frame));
  auto r = validateFrame(bytes, frameFdCount(kType));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(*r, kType);
  Frame back = frameAs<Frame>(bytes);
  EXPECT_EQ(std::memcmp(&back, &frame, sizeof(Frame)), 0);
  EXPECT_EQ(back.header.requestId, 0xdeadbeefu);
}

TYPED_TEST(FrameKindTest, RejectsOneByteShort) {
  Bytes b = this->validBytes();
  b.pop_back();
  // A frame that is only a header (MemFreeReply) becomes shorter than a header.
  bool headerOnly = b.size() < sizeof(FrameHeader);
  expectRejected(b, this->fds(), headerOnly ? "shorter than a frame header" : "length");
}

TYPED_TEST(FrameKindTest, RejectsOneByteLong) {
  Bytes b = this->validBytes();
  b.push_back(0);
  expectRejected(b, this->fds(), "length");
}

TYPED_TEST(FrameKindTest, RejectsShortFrameWhoseHeaderAgrees) {
  // A sender that lies consistently (header length = actual size) is still wrong for the type.
  Bytes b = this->validBytes();
  b.pop_back();
  if (b.size() < sizeof(FrameHeader)) {  // a header-only frame cannot even carry its length
    expectRejected(b, this->fds(), "shorter than a frame header");
    return;
  }
  FrameHeader h = headerOf(b);
  h.length = static_cast<uint32_t>(b.size());
  setHeader(b, h);
  expectRejected(b, this->fds(), "expected " + std::to_string(sizeof(typename TestFixture::Frame)));
}

TYPED_TEST(FrameKindTest, RejectsHeaderLengthDisagreeingWithSize) {
  for (int64_t delta :
       {int64_t{-1}, int64_t{1}, int64_t{8}, -int64_t{sizeof(FrameHeader)}, int64_t{1} << 31}) {
    Bytes b = this->validBytes();
    FrameHeader h = headerOf(b);
    h.length = static_cast<uint32_t>(int64_t(h.length) + delta);
    setHeader(b, h);
    SCOPED_TRACE("header length " + std::to_string(h.length));
    expectRejected(b, this->fds(), "header says " + std::to_string(h.length));
  }
}

TYPED_TEST(FrameKindTest, RejectsBadMagic) {
  for (uint32_t magic : {0u, kFrameMagic ^ 1u, 0x48434950u, ~kFrameMagic}) {
    Bytes b = this->validBytes();
    FrameHeader h = headerOf(b);
    h.magic = magic;
    setHeader(b, h);
    expectRejected(b, this->fds(), "magic");
  }
}

TYPED_TEST(FrameKindTest, RejectsOtherMajorVersion) {
  for (uint16_t major : {uint16_t(0), uint16_t(kProtocolMajor + 1), uint16_t(0xffff)}) {
    Bytes b = this->validBytes();
    FrameHeader h = headerOf(b);
    h.major = major;
    setHeader(b, h);
    expectRejected(b, this->fds(), "protocol version");
  }
}

TYPED_TEST(FrameKindTest, RejectsWrongDescriptorCount) {
  Bytes b = this->validBytes();
  for (size_t fds : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4)}) {
    if (fds == this->fds()) continue;
    SCOPED_TRACE(std::to_string(fds) + " descriptors");
    expectRejected(b, fds, "descriptors");
  }
}

TEST(FrameTest, RejectsEmptyAndShorterThanHeader) {
  expectRejected(Bytes{}, 0, "shorter than a frame header");
  Bytes full = toBytes(makeFrame<MemFreeReplyFrame>(FrameType::MemFreeReply, 1));
  for (size_t n = 1; n < sizeof(FrameHeader); ++n) {
    expectRejected(Bytes(full.begin(), full.begin() + n), 0, "shorter than a frame header");
  }
}

TEST(FrameTest, RejectsUnknownTypes) {
  for (uint16_t type : {uint16_t(0), uint16_t(23), uint16_t(100), uint16_t(0xffff)}) {
    Bytes b = toBytes(makeFrame<MemAllocFrame>(FrameType::MemAlloc, 1));
    FrameHeader h = headerOf(b);
    h.type = type;
    setHeader(b, h);
    expectRejected(b, 0, "unknown frame type " + std::to_string(type));
    EXPECT_EQ(frameSize(static_cast<FrameType>(type)), 0u);
  }
}

TEST(FrameTest, RejectsUnterminatedCmaProbeReplyMessage) {
  auto f = makeFrame<CmaProbeReplyFrame>(FrameType::CmaProbeReply, 1);
  std::memset(f.message, 'x', sizeof(f.message));
  expectRejected(toBytes(f), 0, "not NUL-terminated");
}

TEST(FrameTest, RejectsUnterminatedPeerAddresses) {
  auto info = makeFrame<PeerInfoReplyFrame>(FrameType::PeerInfoReply, 1);
  std::memset(info.address, '1', sizeof(info.address));
  expectRejected(toBytes(info), 0, "PeerInfoReply address is not NUL-terminated");
  auto root = makeFrame<CommRootFrame>(FrameType::CommRoot, 1);
  std::memset(root.address, '1', sizeof(root.address));
  expectRejected(toBytes(root), 0, "CommRoot address is not NUL-terminated");
  root.address[sizeof(root.address) - 1] = '\0';
  EXPECT_TRUE(validateFrame(toBytes(root), 0).isOk());
}

// A CommAreaReply comes with the area's memfd exactly when it says one is present.
TEST(FrameTest, CommAreaReplyCarriesAnFdExactlyWhenPresent) {
  auto reply = makeFrame<CommAreaReplyFrame>(FrameType::CommAreaReply, 5);
  reply.present = 1;
  EXPECT_TRUE(validateFrame(toBytes(reply), 1).isOk());
  expectRejected(toBytes(reply), 0, "expected 1");
  reply.present = 0;
  EXPECT_TRUE(validateFrame(toBytes(reply), 0).isOk());
  expectRejected(toBytes(reply), 1, "expected 0");
  reply.present = 2;
  expectRejected(toBytes(reply), 1, "present is 2");
}

// The client copies a DeviceQueryReply to its caller as it is: every field must already hold.
TEST(FrameTest, DeviceQueryReplyNeedsTerminatedTextAndSaneFigures) {
  auto good = makeFrame<DeviceQueryReplyFrame>(FrameType::DeviceQueryReply, 1);
  good.total = 2;
  good.index = 1;
  good.device.weight = 1.0;
  EXPECT_TRUE(validateFrame(toBytes(good), 0).isOk());
  auto zero = makeFrame<DeviceQueryReplyFrame>(FrameType::DeviceQueryReply, 1);
  EXPECT_TRUE(validateFrame(toBytes(zero), 0).isOk()) << "a node without GPUs answers index 0";

  struct Case {
    const char* needle;
    void (*spoil)(DeviceQueryReplyFrame&);
  };
  const Case cases[] = {
      {"id is not NUL-terminated", [](auto& f) { std::memset(f.device.id, 'x', 32); }},
      {"vendor is not NUL-terminated", [](auto& f) { std::memset(f.device.vendor, 'x', 16); }},
      {"backend is not NUL-terminated", [](auto& f) { std::memset(f.device.backend, 'x', 16); }},
      {"model is not NUL-terminated", [](auto& f) { std::memset(f.device.model, 'x', 96); }},
      {"pciBusId is not NUL-terminated", [](auto& f) { std::memset(f.device.pciBusId, 'x', 16); }},
      {"note is not NUL-terminated", [](auto& f) { std::memset(f.device.note, 'x', 96); }},
      {"out of range", [](auto& f) { f.index = 2; }},
      {"out of range", [](auto& f) { f.total = 0; }},
      {"announces", [](auto& f) { f.total = kMaxDeviceEntries + 1; }},
      {"not finite", [](auto& f) { f.device.weight = std::numeric_limits<double>::quiet_NaN(); }},
      {"not finite", [](auto& f) { f.device.rateGBps = std::numeric_limits<double>::infinity(); }},
      {"negative", [](auto& f) { f.device.h2dGBps = -1; }},
  };
  for (const Case& c : cases) {
    auto bad = good;
    c.spoil(bad);
    expectRejected(toBytes(bad), 0, c.needle);
  }
}

TEST(FrameTest, DeviceEntryLayoutIsUnchanged) {
  EXPECT_EQ(offsetof(DeviceEntry, memoryBytes), 176u);
  EXPECT_EQ(offsetof(DeviceEntry, weight), 192u);
  EXPECT_EQ(offsetof(DeviceEntry, note), 232u);
  EXPECT_EQ(offsetof(DeviceQueryReplyFrame, device), 24u);
  EXPECT_EQ(sizeof(DeviceQueryFrame), 24u);
}

TEST(FrameTest, RejectsOversizeFrames) {
  for (size_t n : {kMaxFrameBytes + 1, kMaxFrameBytes * 4, size_t(1) << 20}) {
    Bytes b(n, 0);
    FrameHeader h{kFrameMagic, kProtocolMajor, uint16_t(FrameType::Hello), uint32_t(n), 1};
    setHeader(b, h);
    expectRejected(b, 0, "exceeds");
  }
}

TEST(FrameTest, RejectsUnterminatedHelloName) {
  auto hello = makeFrame<HelloFrame>(FrameType::Hello, 1);
  std::memset(hello.clientName, 'x', sizeof(hello.clientName));
  expectRejected(toBytes(hello), 0, "NUL-terminated");
  hello.clientName[sizeof(hello.clientName) - 1] = '\0';
  EXPECT_TRUE(validateFrame(toBytes(hello), 0).isOk());
}

TEST(FrameTest, RejectsUnterminatedErrorMessage) {
  auto error = makeFrame<ErrorFrame>(FrameType::Error, 1);
  std::memset(error.message, 'x', sizeof(error.message));
  expectRejected(toBytes(error), 0, "NUL-terminated");
  error.message[sizeof(error.message) - 1] = '\0';
  EXPECT_TRUE(validateFrame(toBytes(error), 0).isOk());
}

TEST(FrameTest, WelcomeNeedsBothDescriptors) {
  Bytes b = toBytes(makeFrame<WelcomeFrame>(FrameType::Welcome, 1));
  EXPECT_EQ(frameFdCount(FrameType::Welcome), 2u);
  expectRejected(b, 0, "expected 2");
  expectRejected(b, 1, "expected 2");
  expectRejected(b, 3, "expected 2");
  EXPECT_TRUE(validateFrame(b, 2).isOk());
}

// The probe hands the daemon the client's /proc/self/mem (protocol 1.4): without it, or with
// more, the frame is refused, so the daemon never falls back to reaching a client by its pid.
TEST(FrameTest, CmaProbeNeedsExactlyOneDescriptor) {
  Bytes b = toBytes(makeFrame<CmaProbeFrame>(FrameType::CmaProbe, 1));
  EXPECT_EQ(frameFdCount(FrameType::CmaProbe), 1u);
  expectRejected(b, 0, "expected 1");
  expectRejected(b, 2, "expected 1");
  EXPECT_TRUE(validateFrame(b, 1).isOk());
  // Its reply carries none.
  EXPECT_EQ(frameFdCount(FrameType::CmaProbeReply), 0u);
  expectRejected(toBytes(makeFrame<CmaProbeReplyFrame>(FrameType::CmaProbeReply, 1)), 1,
                 "expected 0");
}

// Old clients send zeros where flags and pciAddress are (reserved fields before): still valid.
// A flag this side does not know is refused, as it could change what the frame means.
TEST(FrameTest, MemRegisterTakesKnownFlagsOnly) {
  auto frame = makeFrame<MemRegisterFrame>(FrameType::MemRegister, 5);
  frame.handleKind = static_cast<uint32_t>(HandleKind::LegacyIpc);
  EXPECT_TRUE(validateFrame(toBytes(frame), 0).isOk());
  frame.flags = kMemRegisterPciAddress;
  frame.pciAddress = 0x00003b00;
  EXPECT_TRUE(validateFrame(toBytes(frame), 0).isOk());
  frame.flags = 0x0003;
  expectRejected(toBytes(frame), 0, "flags 3");
  frame.flags = 0x8000;
  expectRejected(toBytes(frame), 0, "does not know");
  // The fd rule still applies with the flag set.
  frame.flags = kMemRegisterPciAddress;
  frame.handleKind = static_cast<uint32_t>(HandleKind::Fd);
  expectRejected(toBytes(frame), 0, "expected 1");
  EXPECT_TRUE(validateFrame(toBytes(frame), 1).isOk());
}

// The fields keep the places of the reserved ones they replaced: old and new peers agree on
// every other field.
TEST(FrameTest, MemRegisterLayoutIsUnchanged) {
  EXPECT_EQ(sizeof(MemRegisterFrame), 112u);
  EXPECT_EQ(offsetof(MemRegisterFrame, flags), 18u);
  EXPECT_EQ(offsetof(MemRegisterFrame, device), 20u);
  EXPECT_EQ(offsetof(MemRegisterFrame, handleKind), 40u);
  EXPECT_EQ(offsetof(MemRegisterFrame, pciAddress), 44u);
  EXPECT_EQ(offsetof(MemRegisterFrame, handle), 48u);
}

TEST(PciAddressTest, PacksAsDomainBusDeviceFunction) {
  // 0000:3b:00.0 and the widest fields, written out by hand.
  EXPECT_EQ(packPciAddress(0x0000, 0x3b, 0x00, 0), 0x00003b00u);
  EXPECT_EQ(packPciAddress(0xffff, 0xff, 0x1f, 7), 0xffffffffu);
  EXPECT_EQ(packPciAddress(0x0001, 0x02, 0x03, 4), 0x0001021cu);  // 3 << 3 | 4 = 0x1c
  // Wider values are cut to their field, never spill into the next one.
  EXPECT_EQ(packPciAddress(0x10000, 0x100, 0x20, 8), 0u);
}

TEST(PciAddressTest, UnpacksWhatWasPacked) {
  for (uint32_t domain : {0x0000u, 0x0001u, 0x00ffu, 0xabcdu, 0xffffu}) {
    for (uint32_t bus : {0x00u, 0x3bu, 0xc1u, 0xffu}) {
      for (uint32_t device = 0; device < 32; device += 7) {
        for (uint32_t function = 0; function < 8; ++function) {
          const uint32_t a = packPciAddress(domain, bus, device, function);
          ASSERT_EQ(pciDomain(a), domain);
          ASSERT_EQ(pciBus(a), bus);
          ASSERT_EQ(pciDevice(a), device);
          ASSERT_EQ(pciFunction(a), function);
        }
      }
    }
  }
}

TEST(FrameTest, ErrorFrameCarriesStatusAndTruncatesText) {
  auto frame = makeErrorFrame(9, Status{Code::NotFound, std::string(500, 'm')});
  auto r = validateFrame(frameBytes(frame), 0);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(frame.header.requestId, 9u);
  EXPECT_EQ(frame.status, int32_t(Code::NotFound));
  EXPECT_EQ(std::strlen(frame.message), kMessageBytes - 1);

  auto shortFrame = makeErrorFrame(1, unavailable("daemon draining"));
  EXPECT_STREQ(shortFrame.message, "daemon draining");
}

// Random bytes must never crash the validator, and nothing without the magic may pass. Half the
// buffers get a plausible header so the checks behind the magic and version are exercised too.
TEST(FrameTest, RandomGarbageNeverAcceptedWithoutMagic) {
  std::mt19937_64 rng(0x5eed'f4a3e5ull);
  constexpr int kBuffers = 100'000;
  int accepted = 0;
  for (int i = 0; i < kBuffers; ++i) {
    size_t n = rng() % (kMaxFrameBytes + 64);
    Bytes b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    bool plausible = (rng() & 1) != 0 && n >= sizeof(FrameHeader);
    if (plausible) {
      FrameHeader h = headerOf(b);
      h.magic = kFrameMagic;
      if (rng() % 4 != 0) h.major = kProtocolMajor;
      if (rng() % 2 != 0) h.type = static_cast<uint16_t>(1 + rng() % 9);
      if (rng() % 2 != 0) h.length = static_cast<uint32_t>(n);
      setHeader(b, h);
    }
    size_t fds = rng() % 4;
    auto r = validateFrame(b, fds);
    bool hasMagic = n >= sizeof(uint32_t) && frameAs<uint32_t>(b) == kFrameMagic;
    if (r.isOk()) {
      ++accepted;
      ASSERT_TRUE(hasMagic) << "accepted a " << n << "-byte buffer without the magic";
      FrameHeader h = headerOf(b);
      ASSERT_EQ(h.major, kProtocolMajor);
      ASSERT_EQ(h.length, n);
      ASSERT_EQ(frameSize(*r), n);
      ASSERT_EQ(frameFdCount(*r), fds);
    } else {
      ASSERT_EQ(r.status().code(), Code::InvalidArgument);
      ASSERT_FALSE(r.status().message().empty());
    }
  }
  // A few buffers hit an exact size with the right fd count; the point is that those that pass
  // are well formed, not how many there are.
  RecordProperty("accepted", accepted);
}

}  // namespace
}  // namespace hc::ipc
