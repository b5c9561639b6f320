#include "common/man_page.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>

namespace hc::man {
namespace {

// Left-aligned, never hyphenated: option names, paths and keys must read as typed, and a long
// one must not leave a line that groff cannot adjust.
constexpr const char* kNoBreaks = ".ad l\n.nh\n";

// Splits plain text at empty lines; each paragraph is escaped and starts with .PP.
std::string paragraphs(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const size_t end = text.find("\n\n");
    std::string_view para = text.substr(0, end);
    if (!para.empty()) out += ".PP\n" + escape(para) + "\n";
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 2);
  }
  return out;
}

// The app's description as --help prints it ("hcctl: what it does"), the program's name in bold,
// ended as a sentence.
std::string appDescription(std::string_view description, std::string_view name) {
  if (description.empty()) return {};
  std::string out = ".PP\n";
  if (description.starts_with(name) && description.substr(name.size()).starts_with(": ")) {
    out += "\\fB" + escape(name) + "\\fR";
    description.remove_prefix(name.size());
  }
  out += escape(description);
  return out + (description.ends_with('.') ? "\n" : ".\n");
}

// "\fB\-s\fR, \fB\-\-socket\fR \fITEXT\fR", or the positional's name in italics.
std::string optionTag(const CLI::Option& opt) {
  std::string tag;
  if (!opt.nonpositional()) return "\\fI" + escape(opt.get_name(true)) + "\\fR";
  for (const std::string& s : opt.get_snames()) {
    tag += (tag.empty() ? "" : ", ") + std::string("\\fB") + escape("-" + s) + "\\fR";
  }
  for (const std::string& l : opt.get_lnames()) {
    tag += (tag.empty() ? "" : ", ") + std::string("\\fB") + escape("--" + l) + "\\fR";
  }
  if (opt.get_items_expected_max() > 0) {
    const std::string type = opt.get_type_name();
    if (!type.empty()) tag += " \\fI" + escape(type) + "\\fR";
  }
  return tag;
}

std::string optionBody(const CLI::Option& opt) {
  std::string body = escape(opt.get_description());
  if (const std::string def = opt.get_default_str(); !def.empty()) {
    body += " (default: " + escape(def) + ")";
  }
  if (opt.get_required()) body += " (required)";
  // --help's "Needs:" and "Excludes:", sorted: the sets are ordered by address.
  auto names = [](const std::set<CLI::Option*>& options) {
    std::vector<std::string> out;
    for (const CLI::Option* o : options) out.push_back(o->get_name());
    std::sort(out.begin(), out.end());
    std::string text;
    for (const std::string& n : out) text += (text.empty() ? "" : ", ") + escape(n);
    return text;
  };
  if (!opt.get_needs().empty()) body += " Needs " + names(opt.get_needs()) + ".";
  if (!opt.get_excludes().empty()) body += " Not with " + names(opt.get_excludes()) + ".";
  return body;
}

// Options first, then positional arguments, in the order they were added (as --help lists them).
std::string optionItems(const CLI::App& app, bool withHelp) {
  std::string out;
  const CLI::Option* help = app.get_help_ptr();
  for (bool positional : {false, true}) {
    for (const CLI::Option* opt : app.get_options()) {
      if (opt->get_group().empty() || opt->nonpositional() == positional) continue;
      if (!withHelp && opt == help) continue;
      out += rawItem(optionTag(*opt), optionBody(*opt));
    }
  }
  return out;
}

std::string synopsis(const CLI::App& app, std::string_view name) {
  std::string line = "\\fB" + escape(name) + "\\fR [\\fIOPTIONS\\fR]";
  if (!app.get_subcommands([](const CLI::App*) { return true; }).empty()) {
    line += " \\fICOMMAND\\fR [\\fICOMMAND OPTIONS\\fR]";
  }
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->nonpositional() || opt->get_group().empty()) continue;
    line += " \\fI" + escape(opt->get_name(true)) + "\\fR";
  }
  return ".SH SYNOPSIS\n" + line + "\n";
}

std::string commands(const CLI::App& app) {
  const auto subs = app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
  if (subs.empty()) return {};
  std::string out = ".SH COMMANDS\n";
  for (const CLI::App* sub : subs) {
    out += ".SS " + escape(sub->get_name()) + "\n" + escape(sub->get_description()) + "\n";
    const std::string items = optionItems(*sub, false);
    if (!items.empty()) out += items;
  }
  return out;
}

// Appends the UTF-8 sequence at text[*i] as \[uXXXX] and moves *i past it; a byte that starts
// no valid sequence is written as its Latin-1 code, which is what groff would have read.
void appendNonAscii(std::string_view text, size_t* i, std::string* out) {
  const auto lead = static_cast<unsigned char>(text[*i]);
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  uint32_t code = extra == 3 ? lead & 0x07u : extra == 2 ? lead & 0x0Fu : lead & 0x1Fu;
  bool valid = extra > 0 && *i + extra < text.size();
  for (int k = 1; valid && k <= extra; ++k) {
    const auto c = static_cast<unsigned char>(text[*i + k]);
    valid = (c & 0xC0u) == 0x80u;
    code = (code << 6) | (c & 0x3Fu);
  }
  if (!valid) code = lead;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\[u%04X]", static_cast<unsigned>(code));
  *out += buf;
  *i += valid ? extra + 1 : 1;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  bool lineStart = true;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (lineStart && (c == '.' || c == '\'')) out += "\\&";
    lineStart = false;
    if (static_cast<unsigned char>(c) >= 0x80) {
      appendNonAscii(text, &i, &out);
      continue;
    }
    switch (c) {
      case '\\':
        out += "\\e";
        break;
      case '-':
        out += "\\-";
        break;
      case '\n':
        out += ' ';
        break;
      case '|':
        out += "|\\:";  // may break after it: "a|b|c" lists of choices outgrow a line
        break;
      default:
        out += c;
    }
    ++i;
  }
  return out;
}

std::string item(std::string_view tag, std::string_view body) {
  return rawItem("\\fB" + escape(tag) + "\\fR", escape(body));
}

std::string rawItem(std::string_view roffTag, std::string_view roffBody) {
  std::string out = ".TP\n";
  out += roffTag;
  out += "\n";
  out += roffBody;
  out += "\n";
  return out;
}

std::string header(const PageText& text) {
  std::string upper;
  for (char c : text.name) upper += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return ".TH \"" + escape(upper) + "\" \"" + text.section + "\" \"\" \"" +
         escape("hetero-comm " HC_VERSION) + "\" \"" + escape(text.manual) + "\"\n" + kNoBreaks +
         ".SH NAME\n" + escape(text.name) + " \\- " + escape(text.summary) + "\n";
}

std::string section(const Section& s) {
  std::string out = ".SH \"" + escape(s.title) + "\"\n" + paragraphs(s.text);
  for (const auto& [tag, body] : s.items) out += item(tag, body);
  return out;
}

std::string seeAlso(const std::vector<std::string>& pages) {
  std::string out = ".SH \"SEE ALSO\"\n";
  for (size_t i = 0; i < pages.size(); ++i) {
    const std::string& page = pages[i];
    const size_t paren = page.find('(');
    out += ".BR " + escape(page.substr(0, paren)) + " " + escape(page.substr(paren)) +
           (i + 1 < pages.size() ? ",\n" : "\n");
  }
  return out;
}

std::string render(const CLI::App& app, const PageText& text) {
  std::string out = header(text) + synopsis(app, text.name) + ".SH DESCRIPTION\n";
  out += appDescription(app.get_description(), text.name);
  out += paragraphs(text.description);
  out += ".SH OPTIONS\n" + optionItems(app, true);
  out += commands(app);
  for (const Section& s : text.sections) out += section(s);
  if (!text.seeAlso.empty()) out += seeAlso(text.seeAlso);
  return out;
}

void addPrintManFlag(CLI::App& app, PageText text) {
  CLI::App* self = &app;
  app.add_flag_callback(
         "--print-man",
         [self, text = std::move(text)] {
           std::fputs(render(*self, text).c_str(), stdout);
           throw CLI::Success();
         },
         "print this manual page (roff) and exit")
      ->group("");
}

}  // namespace hc::man
