// Manual pages (man(7) roff) rendered from a program's CLI11 definition, so that a page lists
// exactly the options --help prints. The daemon, hcctl and hc-perf each print their page with a
// hidden --print-man flag; the build writes the pages from it (cmake/HcManPages.cmake).
// Control path only: these functions allocate and may throw what CLI11 throws.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace hc::man {

// Text for a roff text line: a backslash prints as itself (\e), every '-' is \- (so "--socket"
// stays ASCII hyphens when copied from the rendered page), a line that starts with '.' or '\''
// is not taken for a request, a line may break after '|', and non-ASCII UTF-8 becomes \[uXXXX]
// (groff reads bytes as Latin-1 otherwise). Newlines become spaces: callers break lines with the
// macros below.
std::string escape(std::string_view text);

// A tagged paragraph: `tag` in bold (escaped), then `body` (escaped) indented under it.
std::string item(std::string_view tag, std::string_view body);
// A tagged paragraph whose tag and body are roff already (escape() what came from elsewhere).
std::string rawItem(std::string_view roffTag, std::string_view roffBody);

// A section the program adds after OPTIONS (and COMMANDS): FILES, ENVIRONMENT, EXIT STATUS...
// `text` is plain text, paragraphs split by an empty line; each item is a tag and its text.
struct Section {
  std::string title;
  std::string text;
  std::vector<std::pair<std::string, std::string>> items;
};

struct PageText {
  std::string name;     // "hcctl": the page's name and the program's
  std::string section;  // "1", "5", "8"
  std::string manual;   // the header's centre: "User Commands", "System Administration"
  std::string summary;  // NAME: "name \- summary"
  // DESCRIPTION, after the app's own description ("name: what it does"); plain text, paragraphs
  // split by an empty line.
  std::string description;
  std::vector<Section> sections;
  std::vector<std::string> seeAlso;  // "hetero-commd.toml(5)"
};

// .TH and NAME. The date field stays empty: a page built twice from one source is one file.
std::string header(const PageText& text);
// A .SH with its text and items, as for PageText::sections.
std::string section(const Section& s);
// SEE ALSO from "name(section)" entries.
std::string seeAlso(const std::vector<std::string>& pages);

// The whole page: header, SYNOPSIS, DESCRIPTION, OPTIONS (every option --help shows: hidden
// ones, group "", are left out), COMMANDS (one .SS per subcommand, with its options and
// arguments), then text.sections and SEE ALSO.
std::string render(const CLI::App& app, const PageText& text);

// Adds the hidden flag --print-man to `app`: it prints render(app, text) to stdout and ends the
// parse with CLI::Success, as --help does (app.exit() returns 0), before any requirement such as
// a missing subcommand is checked.
void addPrintManFlag(CLI::App& app, PageText text);

}  // namespace hc::man
