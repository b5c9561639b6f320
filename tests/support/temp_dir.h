// Private temporary folders for tests: each test gets its own (mkdtemp, mode 0700) under $TMPDIR,
// so that tests run in parallel and leave nothing behind. HC_INTEG_KEEP (set to anything) keeps
// every folder, and the daemons' logs in it, for debugging a failure.
#pragma once

#include <string>
#include <string_view>

namespace hc::test {

// Creates $TMPDIR/<prefix>-XXXXXX (/tmp when TMPDIR is unset or empty) and returns its path; ""
// when mkdtemp fails (errno says why).
[[nodiscard]] std::string makeTempDir(std::string_view prefix);

// Removes dir and everything in it, unless HC_INTEG_KEEP is set. Errors are ignored: cleanup must
// not fail a test. "" does nothing.
void removeTempDir(const std::string& dir);

// A makeTempDir folder for one scope, removed with removeTempDir when the scope ends. Throws
// std::runtime_error when the folder cannot be made: tests only, where GoogleTest reports it as
// a failure of the test that asked.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name; nothing is created.
  std::string file(std::string_view name) const;
  // Writes content to path()/relative, creating the folders on the way, and returns its path.
  std::string write(const std::string& relative, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace hc::test
