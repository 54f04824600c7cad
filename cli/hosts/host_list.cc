#include "cli/hosts/host_list.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "cli/base/errors.h"
#include "common/text.h"
#include "common/unique_fd.h"

namespace hora::cli {
namespace {

constexpr std::string_view kListForm = "host, host:slots, user@host:slots or [ipv6]:slots";
constexpr std::string_view kFileForm = "'host slots=N' (e.g. 'server1 slots=4')";

// RFC 1035/1123: a host name is at most 253 characters.
constexpr std::size_t kMaxNameLength = 253;
// The most of a rejected value an error echoes.
constexpr std::size_t kMaxEcho = 80;

// `text` as an error echoes it: a control or non-ASCII byte as \xNN (a terminal would act on
// it), and past kMaxEcho bytes cut, saying how long it was (a 1 MB -H is not echoed whole).
std::string echo(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxEcho; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxEcho) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::string echo(char c) { return echo(std::string_view(&c, 1)); }

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool is_user_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
         c == '$';
}

bool is_ipv6_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%' ||
         is_name_char(c);  // zone ids such as %eth0
}

// Parses a positive slot count; returns an explanation on failure.
std::string parse_slots(std::string_view text, int& slots) {
  if (text.empty()) return "the slot count is empty";
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return fmt::format("slot count '{}' is too large (at most {})", echo(text),
                       HostSpec::kMaxSlots);
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    return fmt::format("slot count '{}' is not a number", echo(text));
  }
  if (value < 1) return fmt::format("slot count must be at least 1, not {}", value);
  if (value > HostSpec::kMaxSlots) {
    return fmt::format("slot count {} is too large (at most {})", value, HostSpec::kMaxSlots);
  }
  slots = value;
  return {};
}

// Parses `[user@]host` or `[user@][v6]` and, when allow_slots, an optional `:slots`.
// Returns an explanation on failure.
std::string parse_host_item(std::string_view item, bool allow_slots, HostSpec& out) {
  HostSpec spec;
  if (auto at = item.find('@'); at != std::string_view::npos) {
    std::string_view user = item.substr(0, at);
    if (user.empty()) return "the user name before '@' is empty";
    for (char c : user) {
      if (!is_user_char(c)) {
        return fmt::format("user name '{}' has the character '{}'", echo(user), echo(c));
      }
    }
    spec.user = std::string(user);
    item.remove_prefix(at + 1);
  }
  std::string_view rest;
  if (!item.empty() && item.front() == '[') {
    auto close = item.find(']');
    if (close == std::string_view::npos) return "'[' opens an IPv6 address that ']' never closes";
    std::string_view addr = item.substr(1, close - 1);
    if (addr.empty() || addr.find(':') == std::string_view::npos) {
      return fmt::format("'[{}]' is not an IPv6 address", echo(addr));
    }
    for (char c : addr) {
      if (!is_ipv6_char(c)) {
        return fmt::format("IPv6 address '{}' has the character '{}'", echo(addr), echo(c));
      }
    }
    spec.name = std::string(addr);
    rest = item.substr(close + 1);
  } else {
    auto colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    if (colon != std::string_view::npos && item.find(':', colon + 1) != std::string_view::npos) {
      return fmt::format("'{}' looks like an IPv6 address; write it in brackets: [{}]:slots",
                         echo(item), echo(item));
    }
    if (name.empty()) return "the host name is empty";
    if (name.size() > kMaxNameLength) {
      return fmt::format("host name '{}' is longer than {} characters (RFC 1035)", echo(name),
                         kMaxNameLength);
    }
    for (char c : name) {
      if (!is_name_char(c)) {
        return fmt::format("host name '{}' has the character '{}'", echo(name), echo(c));
      }
    }
    spec.name = std::string(name);
    rest = colon == std::string_view::npos ? std::string_view{} : item.substr(colon);
  }
  if (!rest.empty()) {
    if (rest.front() != ':') return fmt::format("unexpected '{}' after the host name", echo(rest));
    if (!allow_slots) {
      return "write the slots as 'slots=N' after the host, not as ':N'";
    }
    if (std::string why = parse_slots(rest.substr(1), spec.slots); !why.empty()) return why;
  }
  out = std::move(spec);
  return {};
}

void check_duplicates(const std::vector<HostSpec>& hosts, const std::string& where) {
  std::set<std::string> seen;
  for (const HostSpec& h : hosts) {
    if (!seen.insert(h.name).second) {
      throw UsageError(
          fmt::format("{}: host '{}' is listed twice; list each host once with its total slots "
                      "(e.g. {}:{})",
                      where, h.address_for_display(), h.address_for_display(), 2 * h.slots));
    }
  }
}

}  // namespace

std::string HostSpec::address_for_display() const {
  if (name.find(':') != std::string::npos) return "[" + name + "]";
  return name;
}

std::vector<HostSpec> parse_host_list(std::string_view text) {
  std::vector<HostSpec> hosts;
  if (trim(text).empty()) {
    throw UsageError(
        fmt::format("-H/--hosts is empty; expected a comma-separated list of {}", kListForm));
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = trim(text.substr(start, comma - start));
    if (item.empty()) {
      throw UsageError(
          fmt::format("-H '{}': empty item between commas; expected {}", echo(text), kListForm));
    }
    HostSpec spec;
    if (std::string why = parse_host_item(item, /*allow_slots=*/true, spec); !why.empty()) {
      throw UsageError(fmt::format("-H item '{}': {}; expected {}", echo(item), why, kListForm));
    }
    hosts.push_back(std::move(spec));
    start = comma + 1;
  }
  check_duplicates(hosts, "-H");
  return hosts;
}

std::vector<HostSpec> parse_hostfile(std::string_view contents, const std::string& source) {
  std::vector<HostSpec> hosts;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < contents.size()) {
    std::size_t eol = contents.find('\n', pos);
    if (eol == std::string_view::npos) eol = contents.size();
    std::string_view line = contents.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;

    auto fail = [&](const std::string& why) {
      throw UsageError(
          fmt::format("hostfile {} line {}: {}; expected {}", source, line_no, why, kFileForm));
    };
    // Split on whitespace: the host, then key=value fields.
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      std::size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      if (j > i) fields.push_back(line.substr(i, j - i));
      i = j;
    }
    HostSpec spec;
    // `host:N` is MPICH's and Intel MPI's hostfile form (the MPI Operator writes it for them).
    if (std::string why = parse_host_item(fields[0], /*allow_slots=*/true, spec); !why.empty()) {
      fail(fmt::format("'{}': {}", echo(fields[0]), why));
    }
    const std::size_t bracket = fields[0].rfind(']');
    bool have_slots = fields[0].find(':', bracket == std::string_view::npos ? 0 : bracket) !=
                      std::string_view::npos;
    for (std::size_t f = 1; f < fields.size(); ++f) {
      std::string_view field = fields[f];
      auto eq = field.find('=');
      std::string_view key = field.substr(0, eq);
      std::string_view value =
          eq == std::string_view::npos ? std::string_view{} : field.substr(eq + 1);
      if (eq == std::string_view::npos) {
        fail(fmt::format("'{}' is not a key=value field", field));
      } else if (key == "slots") {
        if (have_slots) fail("the slots are given twice (':N' or 'slots=')");
        if (std::string why = parse_slots(value, spec.slots); !why.empty()) fail(why);
        have_slots = true;
      } else if (key == "max_slots") {
        // Tolerated for compatibility with MPI hostfiles; hora never oversubscribes.
        int ignored = 0;
        if (std::string why = parse_slots(value, ignored); !why.empty()) {
          fail("max_slots: " + why);
        }
      } else {
        fail(fmt::format("unknown field '{}' (only slots= and max_slots= are understood)", key));
      }
    }
    hosts.push_back(std::move(spec));
  }
  if (hosts.empty()) {
    throw UsageError(fmt::format("hostfile {} lists no hosts; expected lines of the form {}",
                                 source, kFileForm));
  }
  check_duplicates(hosts, "hostfile " + source);
  return hosts;
}

std::vector<HostSpec> read_hostfile(const std::string& path) {
  // A host file is a short regular file: a directory, a FIFO (which would block until a writer
  // comes), a device or something huge is a mistake. Opened non-blocking, so even a FIFO that
  // appears between the check and the open cannot hang horarun.
  constexpr std::size_t kMaxBytes = 4u << 20;
  hora::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    throw UsageError(fmt::format("--hostfile {}: cannot open the file ({}); check the path", path,
                                 std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw UsageError(fmt::format("--hostfile {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    throw UsageError(
        fmt::format("--hostfile {}: is a directory; give the file that lists the hosts", path));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError(fmt::format(
        "--hostfile {}: is not a regular file (a {}); give a file that lists one host per line "
        "(`server1 slots=4`)",
        path,
        S_ISFIFO(st.st_mode)   ? "FIFO"
        : S_ISSOCK(st.st_mode) ? "socket"
                               : "device"));
  }
  std::string text;
  char buf[65536];
  while (text.size() <= kMaxBytes) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UsageError(fmt::format("--hostfile {}: read error: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.size() > kMaxBytes) {
    throw UsageError(
        fmt::format("--hostfile {}: longer than {} MiB; a host file lists one host per "
                    "line (`server1 slots=4`)",
                    path, kMaxBytes >> 20));
  }
  if (text.find('\0') != std::string::npos) {
    throw UsageError(
        fmt::format("--hostfile {}: contains NUL bytes, so it is not a text file; "
                    "a host file lists one host per line (`server1 slots=4`)",
                    path));
  }
  return parse_hostfile(text, path);
}

long long total_slots(const std::vector<HostSpec>& hosts) {
  long long total = 0;
  for (const HostSpec& h : hosts) total += h.slots;
  return total;
}

}  // namespace hora::cli
