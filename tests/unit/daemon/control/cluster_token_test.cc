// The cluster token file: only its owner may read it, and its content is trimmed and bounded.
#include "daemon/control/cluster_token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/daemon/control/peer_test_support.h"

namespace hc::control::testing {
namespace {

using ::testing::HasSubstr;

std::string secretOf(const ClusterToken& token) {
  return {token.secret().begin(), token.secret().end()};
}

class ClusterTokenModeTest : public ::testing::TestWithParam<mode_t> {
 protected:
  TempDir dir_;
};

TEST_P(ClusterTokenModeTest, GroupOrOtherAccessIsRefused) {
  const std::string path = dir_.file("token");
  writeFile(path, kToken, GetParam());
  Result<ClusterToken> token = ClusterToken::load(path);
  ASSERT_FALSE(token.isOk());
  EXPECT_EQ(token.status().code(), Code::PermissionDenied);
  EXPECT_THAT(token.status().message(), HasSubstr("chmod 600"));
}

INSTANTIATE_TEST_SUITE_P(Modes, ClusterTokenModeTest,
                         ::testing::Values(0644, 0640, 0604, 0660, 0606, 0700 | 0070, 0602));

TEST(ClusterTokenTest, ModeIsNamedInTheError) {
  TempDir dir;
  writeFile(dir.file("t"), kToken, 0644);
  EXPECT_THAT(ClusterToken::load(dir.file("t")).status().message(), HasSubstr("mode 0644"));
}

TEST(ClusterTokenTest, OwnerOnlyFilesAreRead) {
  TempDir dir;
  for (mode_t mode : {0600, 0400}) {
    writeFile(dir.file("t"), std::string(kToken) + " \n", mode);
    Result<ClusterToken> token = ClusterToken::load(dir.file("t"));
    ASSERT_TRUE(token.isOk()) << token.status().toString();
    EXPECT_EQ(secretOf(token.value()), kToken) << "trailing whitespace is not part of the token";
  }
}

TEST(ClusterTokenTest, SymlinkIsFollowedAndTheTargetChecked) {
  TempDir dir;
  writeFile(dir.file("target"), kToken, 0644);
  std::filesystem::create_symlink(dir.file("target"), dir.file("link"));
  EXPECT_EQ(ClusterToken::load(dir.file("link")).status().code(), Code::PermissionDenied);
  ASSERT_EQ(::chmod(dir.file("target").c_str(), 0600), 0);
  EXPECT_TRUE(ClusterToken::load(dir.file("link")).isOk());
}

TEST(ClusterTokenTest, BadContentIsRefused) {
  TempDir dir;
  writeFile(dir.file("short"), "too-short\n", 0600);
  EXPECT_EQ(ClusterToken::load(dir.file("short")).status().code(), Code::InvalidArgument);
  writeFile(dir.file("long"), std::string(kMaxTokenBytes + 10, 'x'), 0600);
  EXPECT_EQ(ClusterToken::load(dir.file("long")).status().code(), Code::InvalidArgument);
  EXPECT_EQ(ClusterToken::load(dir.file("missing")).status().code(), Code::NotFound);
  std::filesystem::create_directory(dir.file("folder"));
  ::chmod(dir.file("folder").c_str(), 0700);
  EXPECT_THAT(ClusterToken::load(dir.file("folder")).status().message(),
              HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace hc::control::testing
