// Manual pages from a CLI11 definition (common/man_page.h): roff escaping, and a page that lists
// what --help lists. The installed pages are checked against the programs, and rendered by groff,
// in tests/packaging/man_pages.sh.
#include "common/man_page.h"

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

namespace hc::man {
namespace {

TEST(ManPageEscapeTest, HyphensBackslashesAndRequests) {
  EXPECT_EQ(escape("--set a.b=1"), "\\-\\-set a.b=1");
  EXPECT_EQ(escape("C:\\dir"), "C:\\edir");
  // A leading '.' or '\'' would be a request; elsewhere they are text.
  EXPECT_EQ(escape(".hidden and 'x'"), "\\&.hidden and 'x'");
  EXPECT_EQ(escape("'quoted'"), "\\&'quoted'");
  EXPECT_EQ(escape("two\nlines"), "two lines");
  EXPECT_EQ(escape("a|b"), "a|\\:b");
}

TEST(ManPageEscapeTest, NonAsciiBecomesNamedCodePoints) {
  EXPECT_EQ(escape("50 \xC2\xB5s"), "50 \\[u00B5]s");   // µ
  EXPECT_EQ(escape("\xE2\x86\x92"), "\\[u2192]");       // →
  EXPECT_EQ(escape("\xF0\x9F\x98\x80"), "\\[u1F600]");  // four bytes
  EXPECT_EQ(escape("bad \xC2"), "bad \\[u00C2]");       // cut short: the byte as Latin-1
  EXPECT_EQ(escape("\xE2(x"), "\\[u00E2](x");           // not a continuation byte
}

TEST(ManPageRenderTest, ListsWhatHelpListsAndLeavesHiddenOut) {
  CLI::App app{"tool: does things", "tool"};
  std::string socket = "/run/x.sock";
  bool json = false;
  int secret = 0;
  std::string comm;
  app.add_option("-s,--socket", socket, "where it listens")->capture_default_str();
  app.add_option("--secret", secret, "not for users")->group("");
  auto* sub = app.add_subcommand("trace", "who has not posted");
  sub->add_flag("--json", json, "print JSON");
  sub->add_option("COMM", comm, "communicator")->required();
  PageText text;
  text.name = "tool";
  text.section = "1";
  text.manual = "User Commands";
  text.summary = "does things";
  text.sections = {{"EXIT STATUS", "", {{"0", "success"}}}};
  text.seeAlso = {"hetero-commd(8)", "hcctl(1)"};
  const std::string page = render(app, text);

  EXPECT_EQ(page.find(".TH \"TOOL\" \"1\" \"\" \"hetero\\-comm "), 0u) << page;
  EXPECT_NE(page.find(".SH NAME\ntool \\- does things\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH SYNOPSIS\n\\fBtool\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find(".PP\n\\fBtool\\fR: does things.\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".TP\n\\fB\\-s\\fR, \\fB\\-\\-socket\\fR \\fITEXT\\fR\nwhere it listens "
                      "(default: /run/x.sock)\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("\\-\\-help"), std::string::npos) << page;
  EXPECT_EQ(page.find("secret"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH COMMANDS\n.SS trace\nwho has not posted\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".TP\n\\fB\\-\\-json\\fR\nprint JSON\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".TP\n\\fICOMM\\fR\ncommunicator (required)\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH \"EXIT STATUS\"\n.TP\n\\fB0\\fR\nsuccess\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH \"SEE ALSO\"\n.BR hetero\\-commd (8),\n.BR hcctl (1)\n"),
            std::string::npos)
      << page;
}

TEST(ManPageRenderTest, PrintManFlagEndsTheParseLikeHelp) {
  CLI::App app{"tool: does things", "tool"};
  app.require_subcommand(1);
  app.add_subcommand("run", "run it");
  PageText text;
  text.name = "tool";
  text.section = "1";
  addPrintManFlag(app, text);
  testing::internal::CaptureStdout();
  int code = -1;
  try {
    app.parse(std::vector<std::string>{"--print-man"});
  } catch (const CLI::ParseError& e) {
    code = e.get_exit_code();
  }
  const std::string out = testing::internal::GetCapturedStdout();
  // A success, before the missing subcommand is noticed.
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.find(".TH \"TOOL\" \"1\""), 0u) << out;
  EXPECT_EQ(out.find("print\\-man"), std::string::npos) << out;
}

}  // namespace
}  // namespace hc::man
