// Who may serve a client socket and which folders it may live in (common/socket_trust.h): the
// rule both the client and the daemon apply, its wording, and binding under a umask.
#include "common/socket_trust.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace hc {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kSelf = 1000;
constexpr uid_t kService = 998;
constexpr gid_t kServiceGroup = 997;
constexpr uid_t kStranger = 1234;

TrustedUsers withService() { return {kSelf, kService, kServiceGroup}; }
TrustedUsers withoutService() { return {kSelf, std::nullopt, std::nullopt}; }

FolderStat folder(uid_t owner, mode_t permissions, gid_t group = 100) {
  return {owner, group, static_cast<mode_t>(S_IFDIR | permissions)};
}

TEST(TrustedUsersTest, TrustsRootTheServiceUserAndItself) {
  const TrustedUsers t = withService();
  EXPECT_TRUE(t.trusts(0));
  EXPECT_TRUE(t.trusts(kService));
  EXPECT_TRUE(t.trusts(kSelf));
  EXPECT_FALSE(t.trusts(kStranger));
  EXPECT_FALSE(t.trusts(65534)) << "nobody is nobody's daemon";
}

TEST(TrustedUsersTest, WithoutTheServiceUserOnlyRootAndItself) {
  const TrustedUsers t = withoutService();
  EXPECT_TRUE(t.trusts(0));
  EXPECT_TRUE(t.trusts(kSelf));
  EXPECT_FALSE(t.trusts(kService));
}

TEST(TrustedUsersTest, DescribeNamesEveryoneAndWhyTheServiceUserIsMissing) {
  EXPECT_EQ(withService().describe(), "root, hetero-comm (uid 998) or this process's uid 1000");
  EXPECT_EQ(withoutService().describe(),
            "root, hetero-comm (no such user here) or this process's uid 1000");
}

TEST(TrustedUsersTest, OfThisProcessIsTheEffectiveUid) {
  EXPECT_EQ(TrustedUsers::ofThisProcess().self, ::geteuid());
}

TEST(SocketFolderTest, PrivateAndReadableFoldersOfTrustedOwnersPass) {
  const TrustedUsers t = withService();
  for (uid_t owner : {uid_t{0}, kService, kSelf}) {
    for (mode_t mode : {0700, 0750, 0755, 01755}) {
      EXPECT_EQ(socketFolderProblem(folder(owner, mode), t), "") << owner << " " << mode;
    }
  }
}

TEST(SocketFolderTest, AnUntrustedOwnerIsRefusedWithWhoWasExpected) {
  EXPECT_EQ(socketFolderProblem(folder(kStranger, 0755), withService()),
            "is owned by uid 1234, expected root, hetero-comm (uid 998) or this process's uid "
            "1000");
}

// Sticky or not: in a folder everyone may write, anyone may take the name first.
TEST(SocketFolderTest, WritableByOthersIsRefusedEvenWhenSticky) {
  for (mode_t mode : {0777, 01777, 0703}) {
    const std::string problem = socketFolderProblem(folder(0, mode), withService());
    EXPECT_THAT(problem, HasSubstr("is writable by others")) << mode;
  }
  EXPECT_THAT(socketFolderProblem(folder(0, 01777), withService()), HasSubstr("(mode 1777)"));
}

TEST(SocketFolderTest, GroupWritableOnlyForTheServiceGroup) {
  EXPECT_EQ(socketFolderProblem(folder(0, 0770, kServiceGroup), withService()), "");
  EXPECT_EQ(socketFolderProblem(folder(kSelf, 0775, 100), withService()),
            "is writable by its group, gid 100 (mode 0775), which is not hetero-comm (gid 997)");
  EXPECT_EQ(socketFolderProblem(folder(kSelf, 0770, 100), withoutService()),
            "is writable by its group, gid 100 (mode 0770), which is not hetero-comm (no such "
            "group here)");
}

TEST(SocketFolderTest, AFileIsNotAFolder) {
  EXPECT_EQ(socketFolderProblem({0, 0, static_cast<mode_t>(S_IFREG | 0644)}, withService()),
            "is not a folder");
}

TEST(SocketFolderTest, ParentFolder) {
  EXPECT_EQ(parentFolder("/run/hetero-comm/hetero-commd.sock"), "/run/hetero-comm");
  EXPECT_EQ(parentFolder("/x.sock"), "/");
  EXPECT_EQ(parentFolder("x.sock"), ".");
  EXPECT_EQ(parentFolder("run/x.sock"), "run");
}

TEST(CheckFolderToServeTest, OwnPrivateFolderPassesAndAWorldWritableOneIsRefused) {
  test::TempDir dir("hc-trust");
  const std::string socket = dir.file("hetero-commd.sock");
  EXPECT_TRUE(checkFolderToServe(socket).isOk()) << checkFolderToServe(socket).toString();
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  const Status s = checkFolderToServe(socket);
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("refusing to serve " + socket + ": its folder " + dir.path() +
                                     " is writable by others (mode 1777)"));
}

TEST(CheckFolderToServeTest, AMissingFolderSaysSo) {
  test::TempDir dir("hc-trust");
  const Status s = checkFolderToServe(dir.file("absent/hetero-commd.sock"));
  EXPECT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr(dir.file("absent")));
}

TEST(CheckFolderToServeTest, AFolderOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a folder to another uid needs root";
  test::TempDir dir("hc-trust");
  const std::string sub = dir.file("theirs");
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  ASSERT_EQ(::chown(sub.c_str(), 65534, 65534), 0);
  const Status s = checkFolderToServe(sub + "/hetero-commd.sock");
  EXPECT_EQ(s.code(), Code::PermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("is owned by uid 65534, expected root"));
}

// The socket file gets its mode at bind(2), so the umask decides it: never wider, not even for
// a moment.
TEST(ScopedUmaskTest, ASocketBoundUnderItIsBornWithTheMode) {
  test::TempDir dir("hc-trust");
  const std::string path = dir.file("s.sock");
  const mode_t before = ::umask(0);
  ::umask(before);
  {
    UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(fd.valid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ScopedUmask mask(0117);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  const mode_t after = ::umask(0);
  ::umask(after);
  EXPECT_EQ(after, before) << "the previous umask comes back";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
}

}  // namespace
}  // namespace hc
