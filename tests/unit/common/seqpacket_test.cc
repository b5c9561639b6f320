// Framed messages with SCM_RIGHTS over a SOCK_SEQPACKET socketpair: boundaries, descriptors,
// truncation, and the statuses a caller's event loop acts on.
#include "common/seqpacket.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace hc {
namespace {

struct SocketPair {
  UniqueFd a;
  UniqueFd b;
};

SocketPair makePair() {
  int sv[2];
  HC_CHECK(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

UniqueFd makeMemfd(const char* name) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  HC_CHECK(fd.valid());
  return fd;
}

bool sameFile(int x, int y) {
  struct stat sx {
  }, sy{};
  if (::fstat(x, &sx) != 0 || ::fstat(y, &sy) != 0) return false;
  return sx.st_ino == sy.st_ino && sx.st_dev == sy.st_dev;
}

int openFdCount() {
  DIR* dir = ::opendir("/proc/self/fd");
  HC_CHECK(dir != nullptr);
  int n = 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n;  // includes ".", ".." and the directory's own fd: constant offsets
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

class SeqpacketTest : public ::testing::TestWithParam<int> {};

TEST_P(SeqpacketTest, FrameAndDescriptorsArriveIntact) {
  const int nfds = GetParam();
  SocketPair p = makePair();
  std::vector<UniqueFd> files;
  std::vector<int> raw;
  for (int i = 0; i < nfds; ++i) {
    files.push_back(makeMemfd("seqpacket-test"));
    raw.push_back(files.back().get());
  }
  auto payload = pattern(333, uint8_t(nfds));
  ASSERT_TRUE(sendMessage(p.a.get(), payload, raw).isOk());

  auto r = receiveMessage(p.b.get(), 1024, /*block=*/true);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->bytes, payload);
  EXPECT_FALSE(r->truncated);
  EXPECT_FALSE(r->fdsTruncated);
  ASSERT_EQ(r->fds.size(), size_t(nfds));
  for (int i = 0; i < nfds; ++i) {
    EXPECT_NE(r->fds[i].get(), raw[i]) << "a passed descriptor is a new number in the receiver";
    EXPECT_TRUE(sameFile(r->fds[i].get(), raw[i])) << "descriptor " << i << " names another file";
    EXPECT_EQ(::fcntl(r->fds[i].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
        << "received descriptors must be close-on-exec";
  }
}
INSTANTIATE_TEST_SUITE_P(ZeroToTwoFds, SeqpacketTest, ::testing::Values(0, 1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "fds"; });

TEST(SeqpacketBoundaryTest, KeepsMessageBoundaries) {
  SocketPair p = makePair();
  for (uint8_t i = 1; i <= 5; ++i) ASSERT_TRUE(sendMessage(p.a.get(), pattern(i * 10, i)).isOk());
  for (uint8_t i = 1; i <= 5; ++i) {
    auto r = receiveMessage(p.b.get(), 1024);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->bytes, pattern(i * 10, i));
  }
}

TEST(SeqpacketBoundaryTest, FlagsTruncationWhenBufferIsSmaller) {
  SocketPair p = makePair();
  auto payload = pattern(100, 3);
  ASSERT_TRUE(sendMessage(p.a.get(), payload).isOk());
  auto r = receiveMessage(p.b.get(), 10, true);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->truncated);
  ASSERT_EQ(r->bytes.size(), 10u);
  EXPECT_TRUE(std::equal(r->bytes.begin(), r->bytes.end(), payload.begin()));
  // The rest of a truncated datagram is discarded; the next message starts clean.
  ASSERT_TRUE(sendMessage(p.a.get(), pattern(5, 9)).isOk());
  auto next = receiveMessage(p.b.get(), 10, true);
  ASSERT_TRUE(next.isOk());
  EXPECT_FALSE(next->truncated);
  EXPECT_EQ(next->bytes, pattern(5, 9));
}

TEST(SeqpacketBoundaryTest, NonblockingEmptyIsNoResource) {
  SocketPair p = makePair();
  auto r = receiveMessage(p.b.get(), 64, /*block=*/false);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::NoResource);
}

TEST(SeqpacketBoundaryTest, PeerCloseIsUnavailable) {
  SocketPair p = makePair();
  ASSERT_TRUE(sendMessage(p.a.get(), pattern(8, 1)).isOk());
  p.a.reset();
  // A message sent before the close is still delivered, then the close is reported.
  auto first = receiveMessage(p.b.get(), 64, false);
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  EXPECT_EQ(first->bytes, pattern(8, 1));
  for (bool block : {false, true}) {
    auto r = receiveMessage(p.b.get(), 64, block);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), Code::Unavailable) << r.status().toString();
  }
}

TEST(SeqpacketBoundaryTest, SendToClosedPeerIsUnavailableWithoutSigpipe) {
  SocketPair p = makePair();
  p.b.reset();
  // A SIGPIPE would kill the test binary here.
  Status s = sendMessage(p.a.get(), pattern(8, 1));
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::Unavailable) << s.toString();
}

TEST(SeqpacketBoundaryTest, RefusesMoreDescriptorsThanTheLimit) {
  SocketPair p = makePair();
  std::vector<UniqueFd> files;
  std::vector<int> raw;
  for (size_t i = 0; i <= kMaxPassedFds; ++i) {
    files.push_back(makeMemfd("too-many"));
    raw.push_back(files.back().get());
  }
  Status s = sendMessage(p.a.get(), pattern(8, 1), raw);
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  auto r = receiveMessage(p.b.get(), 64, false);
  EXPECT_EQ(r.status().code(), Code::NoResource) << "nothing may have been sent";
}

TEST(SeqpacketBoundaryTest, ReceivedDescriptorsCloseWithTheMessage) {
  SocketPair p = makePair();
  const int before = openFdCount();
  {
    UniqueFd x = makeMemfd("close-x");
    UniqueFd y = makeMemfd("close-y");
    int raw[] = {x.get(), y.get()};
    ASSERT_TRUE(sendMessage(p.a.get(), pattern(16, 0), raw).isOk());
  }  // the sender's copies are closed; only the in-flight references remain
  EXPECT_EQ(openFdCount(), before);
  {
    auto r = receiveMessage(p.b.get(), 64, true);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->fds.size(), 2u);
    EXPECT_EQ(openFdCount(), before + 2);
  }
  EXPECT_EQ(openFdCount(), before) << "descriptors of a destroyed ReceivedMessage leaked";
}

TEST(SeqpacketBoundaryTest, ExcessDescriptorsAreFlaggedAndNotLeaked) {
  // A hostile peer may attach more descriptors than the receiver has room for; the kernel drops
  // the excess (MSG_CTRUNC) and the receiver must neither leak nor misreport them.
  SocketPair p = makePair();
  const int before = openFdCount();
  constexpr int kSent = 8;
  {
    std::vector<UniqueFd> files;
    for (int i = 0; i < kSent; ++i) files.push_back(makeMemfd("excess"));
    char byte = 'x';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kSent)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * kSent);
    for (int i = 0; i < kSent; ++i) {
      int fd = files[i].get();
      std::memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof(int));
    }
    ASSERT_EQ(::sendmsg(p.a.get(), &msg, MSG_NOSIGNAL), 1);
  }
  {
    auto r = receiveMessage(p.b.get(), 64, true);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(r->fdsTruncated);
    EXPECT_LE(r->fds.size(), kMaxPassedFds);
    for (auto& fd : r->fds) EXPECT_GE(::fcntl(fd.get(), F_GETFD), 0);
  }
  EXPECT_EQ(openFdCount(), before);
}

TEST(SeqpacketConnectTest, MissingSocketIsUnavailableWithHint) {
  auto r = connectSeqpacket("/nonexistent-dir-for-hc-test/hetero-commd.sock");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::Unavailable) << r.status().toString();
  EXPECT_NE(r.status().message().find("hetero-commd"), std::string::npos);
}

TEST(SeqpacketConnectTest, OverlongPathIsInvalidArgument) {
  auto r = connectSeqpacket("/" + std::string(200, 'p'));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::InvalidArgument);
}

}  // namespace
}  // namespace hc
