#include "cli/options/horovod_config_file.h"

#include <fmt/format.h>

#include <sstream>

#include "cli/base/errors.h"
#include "cli/options/option_file.h"
#include "common/text.h"

namespace hora::cli {
namespace {

// A config file lists a few dozen settings; 1 MiB is the bound of an ssh_config (ssh/config.cc).
constexpr std::size_t kMaxBytes = 1u << 20;

// YAML's blanks (space and tab) and the \r of a CRLF line; other whitespace is content.
constexpr std::string_view kBlank = " \t\r";

// Drops a `#` comment that is not inside quotes.
std::string strip_comment(const std::string& line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

std::string unquote(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
    return v.substr(1, v.size() - 2);
  }
  return v;
}

}  // namespace

std::map<std::string, std::string> read_horovod_config_file(const std::string& path) {
  std::istringstream in(read_option_file("--config-file", path, kMaxBytes,
                                         "horovodrun's YAML config file (a few KiB of "
                                         "'section:' and 'key: value' lines)"));
  std::map<std::string, std::string> out;
  std::string section, line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text = strip_comment(line);
    if (trim(text, kBlank).empty() || trim(text, kBlank) == "---") continue;
    const bool indented = text[0] == ' ' || text[0] == '\t';
    const std::string body(trim(text, kBlank));
    const std::size_t colon = body.find(':');
    if (colon == std::string::npos || colon == 0 || body.front() == '-') {
      throw UsageError(
          fmt::format("--config-file {}:{}: expected 'key: value' or 'section:', "
                      "got '{}'",
                      path, number, body));
    }
    const std::string key(trim(body.substr(0, colon), kBlank));
    const std::string value(trim(body.substr(colon + 1), kBlank));
    if (!indented) {
      if (value.empty()) {
        section = key;
      } else {
        section.clear();
        out[key] = unquote(value);
      }
      continue;
    }
    if (section.empty() || value.empty()) {
      throw UsageError(
          fmt::format("--config-file {}:{}: '{}' is nested deeper than hora "
                      "reads (section, then key: value)",
                      path, number, body));
    }
    out[section + "." + key] = unquote(value);
  }
  return out;
}

}  // namespace hora::cli
