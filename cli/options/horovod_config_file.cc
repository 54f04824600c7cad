#include "cli/options/horovod_config_file.h"

#include <fmt/format.h>

#include <sstream>
#include <string_view>
#include <vector>

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

// The column (1-based) of an unclosed '[' or '{' in `value`, which starts at `column` of its
// line; 0 when every bracket outside quotes closes. A flow collection on one line is what hora
// reads; one left open is a YAML syntax error, said with its place (issue 28 item 12).
std::size_t unclosed_bracket(std::string_view value, std::size_t column) {
  std::vector<std::size_t> open;
  char quote = 0;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '{') {
      open.push_back(column + i);
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    }
  }
  return open.empty() ? 0 : open.front();
}

// `{a: 1, b: 2}` as its items, in `section.key` form; throws on an item that is not `k: v`.
void read_flow_mapping(const std::string& section, std::string_view body, const std::string& where,
                       std::map<std::string, std::string>& out) {
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view item = trim(body.substr(start, comma - start), kBlank);
    start = comma + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      throw UsageError(fmt::format("{}: expected 'key: value' in '{}: {{...}}', got '{}'", where,
                                   section, item));
    }
    out[section + "." + std::string(trim(item.substr(0, colon), kBlank))] =
        unquote(std::string(trim(item.substr(colon + 1), kBlank)));
  }
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
    const std::size_t value_column = text.find(value, text.find(':')) + 1;
    if (const std::size_t column = unclosed_bracket(value, value_column); column != 0) {
      throw UsageError(fmt::format(
          "--config-file {}:{}:{}: YAML syntax error: '{}' is never closed (a flow collection "
          "such as [1, 2] or {{a: 1}} ends on its line)",
          path, number, column, text[column - 1]));
    }
    if (!indented && value.size() >= 2 && value.front() == '{' && value.back() == '}') {
      section.clear();
      read_flow_mapping(key, std::string_view(value).substr(1, value.size() - 2),
                        fmt::format("--config-file {}:{}", path, number), out);
      continue;
    }
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
