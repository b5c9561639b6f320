// The client's check of whoever serves its socket (client/src/server_trust.cc), compiled in
// directly: the refusal's wording, the folders it looks at (symlinks included), and a server of
// this process's own uid, which must pass. A server of another uid refused by a real client
// process is tests/integration/server_trust_test.cc.
#include "client/src/server_trust.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/seqpacket.h"
#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace hc::client {
namespace {

using ::testing::HasSubstr;

const TrustedUsers kTrusted{1000, uid_t{998}, gid_t{997}};

// A listening SEQPACKET socket at path, served by this process.
UniqueFd listenAt(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  HC_CHECK(fd.valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  HC_CHECK(path.size() < sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  HC_CHECK(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  HC_CHECK(::listen(fd.get(), 4) == 0);
  return fd;
}

TEST(ServerTrustTest, RefusalNamesThePathTheUidAndWhoWasExpected) {
  const Status s = checkServerUid("/run/x/hetero-commd.sock", 1234, kTrusted);
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_EQ(s.message(),
            "refusing the daemon at /run/x/hetero-commd.sock: served by uid 1234, expected root, "
            "hetero-comm (uid 998) or this process's uid 1000");
}

TEST(ServerTrustTest, RootTheServiceUserAndItselfMayServe) {
  for (uid_t uid : {uid_t{0}, uid_t{998}, uid_t{1000}}) {
    EXPECT_TRUE(checkServerUid("/run/x.sock", uid, kTrusted).isOk()) << uid;
  }
  const TrustedUsers noService{1000, std::nullopt, std::nullopt};
  const Status s = checkServerUid("/run/x.sock", 998, noService);
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("hetero-comm (no such user here)"));
}

TEST(ServerTrustTest, AServerOfThisProcessInItsOwnFolderPasses) {
  test::TempDir dir("hc-server-trust");
  const std::string path = dir.file("hetero-commd.sock");
  UniqueFd server = listenAt(path);
  auto client = connectSeqpacket(path);
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  const Status s = checkServer(client->get(), path);
  EXPECT_TRUE(s.isOk()) << s.toString();
}

TEST(ServerTrustTest, AWorldWritableFolderIsRefusedEvenForATrustedServer) {
  test::TempDir dir("hc-server-trust");
  const std::string path = dir.file("hetero-commd.sock");
  UniqueFd server = listenAt(path);
  auto client = connectSeqpacket(path);
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  const Status s = checkServer(client->get(), path);
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_EQ(s.message(), "refusing the daemon at " + path + ": its folder " + dir.path() +
                             " is writable by others (mode 1777)");
}

// A symlink is followed by connect(2): both the folder that holds the link and the folder of the
// socket it leads to must pass.
TEST(ServerTrustTest, TheFolderASymlinkLeadsToIsCheckedToo) {
  test::TempDir dir("hc-server-trust");
  const std::string good = dir.file("good");
  const std::string shared = dir.file("shared");
  ASSERT_EQ(::mkdir(good.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(shared.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);  // mkdir's mode passes through the umask

  const std::string real = shared + "/hetero-commd.sock";
  const std::string link = good + "/hetero-commd.sock";
  UniqueFd server = listenAt(real);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  Status s = checkSocketFolders(link, TrustedUsers::ofThisProcess());
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("its folder " + shared + " is writable by others"));

  // The other way round: a link in the shared folder to a socket in a good one.
  const std::string goodSocket = good + "/real.sock";
  const std::string sharedLink = shared + "/link.sock";
  UniqueFd second = listenAt(goodSocket);
  ASSERT_EQ(::symlink(goodSocket.c_str(), sharedLink.c_str()), 0);
  s = checkSocketFolders(sharedLink, TrustedUsers::ofThisProcess());
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("its folder " + shared + " is writable by others"));

  EXPECT_TRUE(checkSocketFolders(goodSocket, TrustedUsers::ofThisProcess()).isOk());
}

// The segment a Welcome hands over: sealed against shrinking and as long as announced, or refused.
TEST(SegmentFdTest, UnsealedOrShortSegmentsAreRefused) {
  UniqueFd sealed(::memfd_create("seg", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(sealed.valid());
  ASSERT_EQ(::ftruncate(sealed.get(), 1 << 20), 0);
  EXPECT_THAT(checkSegmentFd(sealed.get(), 1 << 20).message(), HasSubstr("not sealed"));
  ASSERT_EQ(::fcntl(sealed.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_TRUE(checkSegmentFd(sealed.get(), 1 << 20).isOk());
  EXPECT_THAT(checkSegmentFd(sealed.get(), 2 << 20).message(), HasSubstr("not the 2097152"));
}

}  // namespace
}  // namespace hc::client
