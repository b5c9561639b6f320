// Where the client socket and the daemon's state live by default (common/paths.h): never under
// /tmp, where another user could take the predictable name first. The cases of a user other
// than root run in a forked child that drops to nobody (65534), so they need root and skip
// without it.
#include "common/paths.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "common/status.h"

namespace hc {
namespace {

constexpr uid_t kNobody = 65534;

// Runs f in a forked child as `uid` (effective and real) with the environment changes `setup`
// made there, and returns what f returned ("<failed>" when the child could not run it).
std::string inChildAs(uid_t uid, const std::function<void()>& setup,
                      const std::function<std::string()>& f) {
  int out[2];
  HC_CHECK(::pipe2(out, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  HC_CHECK(pid >= 0);
  if (pid == 0) {
    ::close(out[0]);
    if (uid != ::geteuid() && (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
                               ::setresuid(uid, uid, uid) != 0)) {
      ::_exit(1);
    }
    setup();
    const std::string value = f();
    const bool written =
        ::write(out[1], value.data(), value.size()) == static_cast<ssize_t>(value.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(out[1]);
  std::string value;
  char buffer[512];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof(buffer))) > 0;) value.append(buffer, n);
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? value : "<failed>";
}

void clearEnv() {
  for (const char* name :
       {"HC_SOCKET", "XDG_RUNTIME_DIR", "STATE_DIRECTORY", "XDG_STATE_HOME", "HOME"}) {
    ::unsetenv(name);
  }
}

TEST(PathsTest, HcSocketWins) {
  const std::string value = inChildAs(
      ::geteuid(),
      [] {
        clearEnv();
        ::setenv("HC_SOCKET", "/srv/hc/hetero-commd.sock", 1);
        ::setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
      },
      [] { return defaultSocketPath(); });
  EXPECT_EQ(value, "/srv/hc/hetero-commd.sock");
}

TEST(PathsTest, RootUsesTheSystemSocketWhateverItsRuntimeFolder) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string value = inChildAs(
      0,
      [] {
        clearEnv();
        ::setenv("XDG_RUNTIME_DIR", "/run/user/0", 1);
      },
      [] { return defaultSocketPath(); });
  EXPECT_EQ(value, "/run/hetero-comm/hetero-commd.sock");
}

TEST(PathsTest, AUserWithARuntimeFolderUsesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  const std::string value = inChildAs(
      kNobody,
      [] {
        clearEnv();
        ::setenv("XDG_RUNTIME_DIR", "/run/user/65534", 1);
      },
      [] { return defaultSocketPath(); });
  EXPECT_EQ(value, "/run/user/65534/hetero-comm/hetero-commd.sock");
}

// Never a folder under /tmp, where another user could create the predictable name first: a user
// without a runtime folder reaches the system daemon.
TEST(PathsTest, AUserWithoutARuntimeFolderUsesTheSystemSocketNeverTmp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  const std::string value = inChildAs(kNobody, clearEnv, [] { return defaultSocketPath(); });
  EXPECT_EQ(value, "/run/hetero-comm/hetero-commd.sock");
}

TEST(PathsTest, StateOfAUserFollowsXdgThenHome) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  EXPECT_EQ(inChildAs(
                kNobody,
                [] {
                  clearEnv();
                  ::setenv("XDG_STATE_HOME", "/home/n/.state", 1);
                },
                [] { return defaultStateDir(); }),
            "/home/n/.state/hetero-comm");
  EXPECT_EQ(inChildAs(
                kNobody,
                [] {
                  clearEnv();
                  ::setenv("HOME", "/home/n", 1);
                },
                [] { return defaultStateDir(); }),
            "/home/n/.local/state/hetero-comm");
}

// nobody's home in the user database is /nonexistent: no default rather than a shared folder,
// and the daemon's configuration check asks for --state-dir.
TEST(PathsTest, StateOfAUserWithoutAHomeHasNoDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  EXPECT_EQ(inChildAs(kNobody, clearEnv, [] { return defaultStateDir(); }), "");
}

TEST(PathsTest, StateOfRootIsVarLib) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  EXPECT_EQ(inChildAs(0, clearEnv, [] { return defaultStateDir(); }), "/var/lib/hetero-comm");
}

}  // namespace
}  // namespace hc
