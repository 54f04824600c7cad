#include "ssh/config.h"

#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/text.h"
#include "common/unique_fd.h"
#include "ssh/errors.h"
#include "ssh/pattern.h"

namespace hora::ssh {
namespace {

constexpr int kMaxIncludeDepth = 16;  // as OpenSSH's READCONF_MAX_DEPTH
// An ssh_config is a few KiB; these bound what a wrong path (/dev/zero, a log file) or an Include
// tree that fans out can cost before it is refused.
constexpr std::size_t kMaxConfigFileBytes = 1u << 20;
constexpr std::size_t kMaxConfigFiles = 256;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Splits a value the way OpenSSH's argv_split does: whitespace separates, "double" and 'single'
// quotes group, a backslash escapes the next character, an unquoted `#` starting a word ends
// the line.
std::vector<std::string> split_args(std::string_view s, const std::string& where) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i >= s.size() || s[i] == '#') break;
    std::string word;
    char quote = 0;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '\\' && i + 1 < s.size() && (quote == 0 || s[i + 1] == quote || s[i + 1] == '\\')) {
        word += s[++i];
      } else if (quote != 0) {
        if (c == quote)
          quote = 0;
        else
          word += c;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (is_space(c)) {
        break;
      } else {
        word += c;
      }
    }
    if (quote != 0) throw ConfigError(where + ": unterminated quote");
    out.push_back(std::move(word));
  }
  return out;
}

// Everything collected from the files; first value wins (std::optional unset = not seen yet).
struct Collected {
  std::optional<std::string> hostname;
  std::optional<std::string> user;
  std::optional<int> port;
  std::vector<std::pair<std::string, std::string>> identity_files;  // raw value, where
  std::optional<std::chrono::seconds> connect_timeout;              // 0 = "none"
  std::optional<HostKeyPolicy> host_key_policy;
  std::optional<std::pair<std::vector<std::string>, std::string>> known_hosts;  // raw values, where
  std::optional<bool> identities_only;
  // The first ProxyJump or ProxyCommand (OpenSSH uses whichever comes first; `none` = direct).
  struct Proxy {
    std::string keyword;  // "ProxyJump" or "ProxyCommand"
    bool none = false;
    std::string file;
    int line = 0;
  };
  std::optional<Proxy> proxy;
  std::vector<std::string> files;         // every file read, in order, Includes too
  std::optional<std::string> host_entry;  // "file:line" of the first Host line naming the host
};

int parse_port(const std::string& v, const std::string& where) {
  int port = 0;
  if (v.empty() || v.size() > 5 || !std::all_of(v.begin(), v.end(), ::isdigit) ||
      (port = std::stoi(v)) < 1 || port > 65535) {
    throw ConfigError(where + ": Port must be a number 1..65535, not '" + v + "'");
  }
  return port;
}

// OpenSSH time format: "30", "30s", "2m", "1h30m"; "none" = 0.
std::chrono::seconds parse_time(const std::string& v, const std::string& where) {
  if (lower(v) == "none") return std::chrono::seconds(0);
  long total = 0, cur = 0;
  bool digits = false;
  for (char c : v) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = cur * 10 + (c - '0');
      digits = true;
      if (cur > 100000000) break;
      continue;
    }
    const char u = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const long mult = u == 's'   ? 1
                      : u == 'm' ? 60
                      : u == 'h' ? 3600
                      : u == 'd' ? 86400
                      : u == 'w' ? 604800
                                 : 0;
    if (!digits || mult == 0) {
      throw ConfigError(where + ": ConnectTimeout must be seconds (10, 30s, 2m), not '" + v + "'");
    }
    total += cur * mult;
    cur = 0;
    digits = false;
  }
  if (v.empty() || total + cur > 100000000) {
    throw ConfigError(where + ": ConnectTimeout must be seconds (10, 30s, 2m), not '" + v + "'");
  }
  return std::chrono::seconds(total + cur);
}

bool parse_yes_no(const std::string& v, const std::string& keyword, const std::string& where) {
  const std::string l = lower(v);
  if (l == "yes" || l == "true") return true;
  if (l == "no" || l == "false") return false;
  throw ConfigError(where + ": " + keyword + " must be yes or no, not '" + v + "'");
}

// "~" and "~/x" -> home; "~user/x" -> that user's home.
std::string expand_tilde(const std::string& path, const LocalIdentity& local,
                         const std::string& where) {
  if (path.empty() || path[0] != '~') return path;
  const std::size_t slash = path.find('/');
  const std::string name =
      path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string home;
  if (name.empty()) {
    home = local.home;
  } else {
    struct passwd pw {};
    struct passwd* res = nullptr;
    char buf[4096];
    if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &res) != 0 || res == nullptr) {
      throw ConfigError(where + ": no user '" + name + "' for " + path);
    }
    home = res->pw_dir;
  }
  return slash == std::string::npos ? home : home + path.substr(slash);
}

std::string expand_tokens(const std::string& value, const std::map<char, std::string>& tokens,
                          const std::string& keyword, const std::string& where) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    if (i + 1 >= value.size()) throw ConfigError(where + ": " + keyword + " ends with a lone '%'");
    const char t = value[++i];
    if (t == '%') {
      out += '%';
      continue;
    }
    const auto it = tokens.find(t);
    if (it == tokens.end()) {
      std::string known;
      for (const auto& [k, v] : tokens) known += std::string(known.empty() ? "" : " ") + "%" + k;
      throw ConfigError(where + ": " + keyword + " uses %" + std::string(1, t) +
                        ", which hora does not expand there (supported: " + known + " %%)");
    }
    out += it->second;
  }
  return out;
}

// Reads files the way OpenSSH's read_config_file_depth does: `active` says whether the current
// line applies; Host/Match lines reassign it; an Include is read with the includer's state and
// the state is restored afterwards. `never_match` is OpenSSH's SSHCONF_NEVERMATCH (a file
// included from a non-matching block: none of its Host lines may match) — since such a file then
// cannot contribute anything, it is not read at all.
class Reader {
 public:
  Reader(std::string host, const LocalIdentity& local, Collected& out)
      : host_(std::move(host)), local_(local), out_(out) {}

  // Returns false when the file does not exist (only an error when `required`).
  bool read(const std::string& path, bool required, bool user_conf, int depth, bool active) {
    if (depth > kMaxIncludeDepth) {
      throw ConfigError(path + ": Include nested more than " + std::to_string(kMaxIncludeDepth) +
                        " deep (an Include loop?)");
    }
    if (out_.files.size() >= kMaxConfigFiles) {
      throw ConfigError(path + ": more than " + std::to_string(kMaxConfigFiles) +
                        " ssh config files read through Include (Includes that fan out?)");
    }
    std::string text;
    if (!slurp(path, required, &text)) return false;
    out_.files.push_back(path);
    std::size_t number = 0;
    for (std::size_t at = 0; at < text.size();) {
      std::size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      ++number;
      process(std::string_view(text).substr(at, end - at), path, static_cast<int>(number),
              user_conf, depth, active);
      at = end + 1;
    }
    return true;
  }

 private:
  // Reads a whole config file into *text; false when it does not exist and is not `required`.
  // Only regular files (and /dev/null, the usual "no config") are read, at most
  // kMaxConfigFileBytes of them: a FIFO, a device or a directory is refused by name.
  static bool slurp(const std::string& path, bool required, std::string* text) {
    const std::string given = required ? " (given with --ssh-config)" : "";
    if (path == "/dev/null") return true;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      if (!required && (errno == ENOENT || errno == ENOTDIR)) return false;
      throw ConfigError("cannot read ssh config " + path + ": " + std::strerror(errno) + given);
    }
    UniqueFd owner(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      throw ConfigError("cannot read ssh config " + path + ": " + std::strerror(errno) + given);
    }
    if (!S_ISREG(st.st_mode)) {
      const char* what = S_ISDIR(st.st_mode)                          ? "a directory"
                         : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                         : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                                      : "not a regular file";
      throw ConfigError("cannot read ssh config " + path + ": it is " + what +
                        ", not a regular file" + given);
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        throw ConfigError("cannot read ssh config " + path + ": " + std::strerror(errno) + given);
      }
      if (n == 0) break;
      if (text->size() + static_cast<std::size_t>(n) > kMaxConfigFileBytes) {
        throw ConfigError("cannot read ssh config " + path + ": it is larger than " +
                          std::to_string(kMaxConfigFileBytes >> 20) +
                          " MiB, too large for an ssh_config" + given);
      }
      text->append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }

  void process(std::string_view line, const std::string& path, int number, bool user_conf,
               int depth, bool& active) {
    const std::string where = path + ":" + std::to_string(number);
    std::size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i >= line.size() || line[i] == '#') return;
    std::size_t j = i;
    while (j < line.size() && !is_space(line[j]) && line[j] != '=') ++j;
    const std::string keyword = lower(line.substr(i, j - i));
    while (j < line.size() && is_space(line[j])) ++j;
    if (j < line.size() && line[j] == '=') ++j;
    const std::vector<std::string> args = split_args(line.substr(j), where);

    auto need = [&](std::size_t n) {
      if (args.size() < n) throw ConfigError(where + ": " + keyword + " needs a value");
    };

    if (keyword == "host") {
      need(1);
      std::vector<std::string_view> patterns(args.begin(), args.end());
      active = match_pattern_list(host_, patterns) == PatternMatch::kMatch;
      // Remember the first Host line that names this host, for "not an alias" hints: a pattern
      // of only wildcards (`Host *`) applies to every host and names none.
      if (active && !out_.host_entry) {
        for (const std::string& p : args) {
          if (!p.empty() && p[0] != '!' && p.find_first_not_of("*?") != std::string::npos &&
              match_pattern(host_, p)) {
            out_.host_entry = where;
            break;
          }
        }
      }
      return;
    }
    if (keyword == "match") {
      need(1);
      // Only `Match all` is evaluated; other criteria (host, user, exec, ...) are not, and their
      // blocks are skipped: documented in config.h and docs/ssh.md.
      active = args.size() == 1 && lower(args[0]) == "all";
      return;
    }
    if (!active) return;

    if (keyword == "include") {
      need(1);
      for (const std::string& arg : args) {
        std::string pattern = expand_tilde(arg, local_, where);
        if (pattern.empty() || pattern[0] != '/') {
          pattern = (user_conf ? local_.home + "/.ssh/" : std::string("/etc/ssh/")) + pattern;
        }
        // Freed however the loop ends: read() throws for a bad value or an Include loop.
        struct Glob {
          glob_t g{};
          ~Glob() { ::globfree(&g); }
        } matches;
        const int rc = ::glob(pattern.c_str(), 0, nullptr, &matches.g);
        if (rc == 0) {
          // glob() sorts, so included files apply in name order, as in OpenSSH.
          for (std::size_t k = 0; k < matches.g.gl_pathc; ++k) {
            read(matches.g.gl_pathv[k], false, user_conf, depth + 1, /*active=*/true);
          }
        }
        // GLOB_NOMATCH: an Include that matches nothing is fine (conf.d directories are often
        // empty).
      }
      return;
    }
    if (keyword == "hostname") {
      need(1);
      if (!out_.hostname) out_.hostname = args[0];
    } else if (keyword == "user") {
      need(1);
      if (!out_.user) out_.user = args[0];
    } else if (keyword == "port") {
      need(1);
      const int port = parse_port(args[0], where);
      if (!out_.port) out_.port = port;
    } else if (keyword == "identityfile") {
      need(1);
      out_.identity_files.emplace_back(args[0], where);
    } else if (keyword == "connecttimeout") {
      need(1);
      const auto t = parse_time(args[0], where);
      if (!out_.connect_timeout) out_.connect_timeout = t;
    } else if (keyword == "stricthostkeychecking") {
      need(1);
      const HostKeyPolicy p = parse_host_key_policy(args[0], where);
      if (!out_.host_key_policy) out_.host_key_policy = p;
    } else if (keyword == "userknownhostsfile") {
      need(1);
      if (!out_.known_hosts) out_.known_hosts.emplace(args, where);
    } else if (keyword == "identitiesonly") {
      need(1);
      const bool v = parse_yes_no(args[0], "IdentitiesOnly", where);
      if (!out_.identities_only) out_.identities_only = v;
    } else if (keyword == "proxyjump" || keyword == "proxycommand") {
      // Recorded so that resolve() can refuse the host: hora cannot honour them, and ignoring
      // them would send the connection straight to HostName, to time out or reach the wrong box.
      need(1);
      if (!out_.proxy) {
        out_.proxy = Collected::Proxy{keyword == "proxyjump" ? "ProxyJump" : "ProxyCommand",
                                      args.size() == 1 && lower(args[0]) == "none", path, number};
      }
    }
    // Every other keyword is OpenSSH's business, not hora's: ignored on purpose.
  }

  std::string host_;
  const LocalIdentity& local_;
  Collected& out_;
};

bool is_ipv6_literal(const std::string& h) { return h.find(':') != std::string::npos; }

}  // namespace

LocalIdentity LocalIdentity::current() {
  LocalIdentity id;
  const uid_t uid = ::getuid();
  id.uid = std::to_string(uid);
  struct passwd pw {};
  struct passwd* res = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res != nullptr) {
    id.home = res->pw_dir;
    id.user = res->pw_name;
  } else {
    // A uid without a passwd entry (some containers): fall back to $HOME and the number.
    const char* home = std::getenv("HOME");
    id.home = home != nullptr ? home : "/";
    id.user = id.uid;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) id.hostname = host;
  return id;
}

std::string Target::endpoint() const {
  return is_ipv6_literal(hostname) ? "[" + hostname + "]:" + std::to_string(port)
                                   : hostname + ":" + std::to_string(port);
}

std::string Target::describe() const {
  if (alias == hostname) return endpoint();
  return alias + " (" + endpoint() + ")";
}

HostSpec parse_host_spec(std::string_view spec) {
  HostSpec out;
  const auto at = spec.rfind('@');
  if (at != std::string_view::npos) {
    if (at == 0) throw ConfigError("'" + std::string(spec) + "': empty user name before '@'");
    out.user = std::string(spec.substr(0, at));
    spec.remove_prefix(at + 1);
  }
  if (spec.size() >= 2 && spec.front() == '[' && spec.back() == ']') {
    spec = spec.substr(1, spec.size() - 2);
  }
  if (spec.empty()) throw ConfigError("empty host name");
  out.host = std::string(spec);
  return out;
}

Target resolve(std::string_view host_spec, const Overrides& overrides, const ConfigSource& source) {
  const HostSpec spec = parse_host_spec(host_spec);
  const LocalIdentity& local = source.local;
  const std::string host = lower(spec.host);

  Collected c;
  Reader reader(host, local, c);
  if (source.file == "none") {
    // no configuration at all
  } else if (!source.file.empty()) {
    reader.read(expand_tilde(source.file, local, "--ssh-config"), /*required=*/true,
                /*user_conf=*/true, 0, true);
  } else {
    reader.read(local.home + "/.ssh/config", false, true, 0, true);
    if (!source.system_file.empty()) reader.read(source.system_file, false, false, 0, true);
  }

  if (c.proxy && !c.proxy->none) {
    throw ConfigError(
        spec.host + ": ssh_config sets " + c.proxy->keyword + " (line " +
        std::to_string(c.proxy->line) + " of " + c.proxy->file +
        "); horarun connects directly and does not support ProxyJump/ProxyCommand: make the host "
        "reachable directly or run horarun from a host that reaches it");
  }

  Target t;
  t.alias = spec.host;
  t.from_config = true;
  t.config_files = c.files;
  t.host_entry = c.host_entry.value_or("");
  t.hostname =
      c.hostname ? expand_tokens(*c.hostname, {{'h', host}}, "HostName", "HostName " + *c.hostname)
                 : spec.host;
  t.user = spec.user        ? *spec.user
           : overrides.user ? *overrides.user
           : c.user         ? *c.user
                            : local.user;
  t.port = overrides.port ? *overrides.port : c.port ? *c.port : kDefaultPort;
  if (overrides.connect_timeout && overrides.connect_timeout->count() > 0) {
    t.connect_timeout = *overrides.connect_timeout;
  } else if (c.connect_timeout && c.connect_timeout->count() > 0) {
    t.connect_timeout = *c.connect_timeout;
  }
  t.host_key_policy = overrides.host_key_policy ? *overrides.host_key_policy
                      : c.host_key_policy       ? *c.host_key_policy
                                                : kDefaultHostKeyPolicy;
  t.identities_only = c.identities_only.value_or(false);

  std::string short_host = local.hostname.substr(0, local.hostname.find('.'));
  const std::map<char, std::string> tokens = {
      {'d', local.home}, {'u', local.user}, {'l', local.hostname},         {'L', short_host},
      {'h', t.hostname}, {'n', t.alias},    {'p', std::to_string(t.port)}, {'r', t.user},
      {'i', local.uid},
  };
  auto add_identity = [&](const std::string& raw, const std::string& where) {
    std::string path =
        expand_tokens(expand_tilde(raw, local, where), tokens, "IdentityFile", where);
    if (std::find(t.identity_files.begin(), t.identity_files.end(), path) ==
        t.identity_files.end()) {
      t.identity_files.push_back(std::move(path));
    }
  };
  for (const std::string& f : overrides.identity_files)
    add_identity(f, "-i/--ssh-identity-file " + f);
  for (const auto& [raw, where] : c.identity_files) add_identity(raw, where);
  if (t.identity_files.empty()) {
    t.identity_files_are_defaults = true;
    for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
      t.identity_files.push_back(local.home + "/.ssh/" + name);
    }
  }

  if (c.known_hosts) {
    for (const std::string& raw : c.known_hosts->first) {
      if (lower(raw) == "none") continue;
      t.known_hosts_files.push_back(expand_tokens(expand_tilde(raw, local, c.known_hosts->second),
                                                  tokens, "UserKnownHostsFile",
                                                  c.known_hosts->second));
    }
  } else {
    t.known_hosts_files = {local.home + "/.ssh/known_hosts", local.home + "/.ssh/known_hosts2"};
  }
  return t;
}

}  // namespace hora::ssh
