#include "ssh/known_hosts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/text.h"
#include "ssh/errors.h"
#include "ssh/pattern.h"

namespace hora::ssh {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// `|1|salt|hash`: HMAC-SHA1 keyed with the salt over the name, as OpenSSH's HashKnownHosts.
bool hashed_host_matches(std::string_view field, std::string_view name) {
  constexpr std::string_view kMagic = "|1|";
  if (field.substr(0, kMagic.size()) != kMagic) return false;
  field.remove_prefix(kMagic.size());
  const auto bar = field.find('|');
  if (bar == std::string_view::npos) return false;
  std::string salt, want;
  try {
    salt = base64_decode(field.substr(0, bar));
    want = base64_decode(field.substr(bar + 1));
  } catch (const Error&) {
    return false;  // a corrupt hashed entry matches nothing, like OpenSSH
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha1(), salt.data(), static_cast<int>(salt.size()),
           reinterpret_cast<const unsigned char*>(name.data()), name.size(), mac,
           &mac_len) == nullptr) {
    return false;
  }
  return want.size() == mac_len && std::memcmp(want.data(), mac, mac_len) == 0;
}

// Serialises appends from the sessions of one process (parallel preflight); O_APPEND handles
// other processes.
std::mutex& append_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

HostKeyPolicy parse_host_key_policy(std::string_view value, std::string_view where) {
  const std::string v = lower(value);
  if (v == "yes" || v == "ask" || v == "true") return HostKeyPolicy::kYes;
  if (v == "accept-new") return HostKeyPolicy::kAcceptNew;
  if (v == "no" || v == "off" || v == "false") return HostKeyPolicy::kNo;
  throw ConfigError(std::string(where) +
                    ": StrictHostKeyChecking must be yes, accept-new or no, not '" +
                    std::string(value) + "'");
}

std::string_view to_string(HostKeyPolicy policy) {
  switch (policy) {
    case HostKeyPolicy::kYes: return "yes";
    case HostKeyPolicy::kAcceptNew: return "accept-new";
    case HostKeyPolicy::kNo: return "no";
  }
  return "?";
}

std::string base64_encode(std::string_view bytes) {
  if (bytes.empty()) return {};
  // EVP_EncodeBlock writes 4 characters per started 3 bytes, padded with '=', plus a NUL.
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string base64_decode(std::string_view text) {
  // Padding is optional here (fingerprints and some tools drop it). EVP_DecodeBlock wants whole
  // 4-character groups and returns the padded length, so the '=' are put back for it and their
  // bytes taken off again afterwards.
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  const std::size_t bad = text.find_first_not_of(kAlphabet);
  if (bad != std::string_view::npos) {
    throw Error("invalid base64 character '" + std::string(1, text[bad]) + "'");
  }
  if (text.size() % 4 == 1) throw Error("invalid base64 length");
  if (text.empty()) return {};
  const std::size_t pad = (4 - text.size() % 4) % 4;
  std::string in(text);
  in.append(pad, '=');
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0 || static_cast<std::size_t>(n) != out.size()) throw Error("invalid base64 data");
  out.resize(out.size() - pad);
  return out;
}

HostKey HostKey::from_blob(std::string blob) {
  if (blob.size() < 4) throw Error("host key blob too short");
  const std::uint32_t n = (std::uint8_t(blob[0]) << 24) | (std::uint8_t(blob[1]) << 16) |
                          (std::uint8_t(blob[2]) << 8) | std::uint8_t(blob[3]);
  if (n == 0 || n > blob.size() - 4) throw Error("host key blob has a bad type length");
  HostKey key;
  key.type = blob.substr(4, n);
  key.blob = std::move(blob);
  return key;
}

HostKey HostKey::from_base64(std::string_view type, std::string_view base64) {
  HostKey key = from_blob(base64_decode(base64));
  if (key.type != type) {
    throw Error("key type '" + std::string(type) + "' does not match the key data ('" + key.type +
                "')");
  }
  return key;
}

std::string HostKey::base64() const { return base64_encode(blob); }

std::string HostKey::fingerprint() const {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(blob.data(), blob.size(), md, &md_len, EVP_sha256(), nullptr);
  std::string b64 = base64_encode(std::string_view(reinterpret_cast<const char*>(md), md_len));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

std::string known_hosts_name(std::string_view host, int port) {
  if (port == 22) return lower(host);
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) about "[" + string&&.
  std::string name = "[";
  name += lower(host);
  name += "]:";
  name += std::to_string(port);
  return name;
}

KnownHosts::KnownHosts(std::vector<std::string> files) : files_(std::move(files)) {
  for (const std::string& file : files_) {
    std::ifstream in(file);
    if (!in) {
      if (errno == ENOENT || errno == ENOTDIR) continue;  // missing file: nothing known yet
      throw Error("cannot read known_hosts file " + file + ": " + std::strerror(errno));
    }
    std::string text;
    int number = 0;
    while (std::getline(in, text)) {
      ++number;
      std::vector<std::string_view> f = split_ws(text);
      if (f.empty() || f[0].front() == '#') continue;
      bool revoked = false;
      if (f[0].front() == '@') {
        if (f[0] == "@revoked") {
          revoked = true;
        } else {
          continue;  // @cert-authority (or an unknown marker): hora does not use host certificates
        }
        f.erase(f.begin());
      }
      if (f.size() < 3) continue;  // malformed lines are skipped, as OpenSSH does
      Line line;
      line.file = file;
      line.line = number;
      line.revoked = revoked;
      line.hosts = std::string(f[0]);
      try {
        line.key = HostKey::from_base64(f[1], f[2]);
      } catch (const Error&) {
        continue;  // undecodable key: skipped like any malformed line
      }
      lines_.push_back(std::move(line));
    }
  }
}

bool KnownHosts::host_matches(const Line& line, std::string_view name) const {
  if (line.hosts.front() == '|') return hashed_host_matches(line.hosts, name);
  return match_pattern_csv(name, line.hosts) == PatternMatch::kMatch;
}

KnownHosts::Lookup KnownHosts::check(std::string_view name, const HostKey& key) const {
  Lookup result;
  const Line* known = nullptr;
  const Line* changed = nullptr;
  for (const Line& line : lines_) {
    // @revoked lines apply to any host pattern ("*" is common), so check them by key first.
    if (line.revoked) {
      if (line.key == key && host_matches(line, name)) {
        result.status = Status::kRevoked;
        result.entry = {line.file, line.line, line.key};
        return result;
      }
      continue;
    }
    if (line.key.type != key.type || !host_matches(line, name)) continue;
    if (line.key == key) {
      if (known == nullptr) known = &line;
    } else if (changed == nullptr) {
      changed = &line;
    }
  }
  // A host may legitimately be listed twice (two files, an old line); any exact match is enough.
  if (known != nullptr) {
    result.status = Status::kKnown;
    result.entry = {known->file, known->line, known->key};
  } else if (changed != nullptr) {
    result.status = Status::kChanged;
    result.entry = {changed->file, changed->line, changed->key};
  }
  return result;
}

std::vector<std::string> KnownHosts::known_types(std::string_view name) const {
  std::vector<std::string> types;
  for (const Line& line : lines_) {
    if (line.revoked || !host_matches(line, name)) continue;
    if (std::find(types.begin(), types.end(), line.key.type) == types.end()) {
      types.push_back(line.key.type);
    }
  }
  return types;
}

void KnownHosts::add(const std::string& file, std::string_view name, const HostKey& key) {
  const std::string text = std::string(name) + " " + key.type + " " + key.base64() + "\n";
  std::lock_guard<std::mutex> lock(append_mutex());
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (std::filesystem::create_directories(dir, ec)) {
      ::chmod(dir.c_str(), 0700);
    }
  }
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot record the host key of " + std::string(name) + " in " + file + ": " +
                std::strerror(errno));
  }
  // Keep a file without a trailing newline well-formed: start our line on a new line.
  struct stat st {};
  std::string out = text;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') out = "\n" + text;
  }
  const ssize_t n = ::write(fd, out.data(), out.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(out.size())) {
    throw Error("cannot record the host key of " + std::string(name) + " in " + file + ": " +
                (n < 0 ? std::strerror(err) : "short write"));
  }
  remember(file, name, key);
}

void KnownHosts::remember(const std::string& file, std::string_view name, const HostKey& key) {
  Line line;
  line.file = file;
  line.line = 0;
  line.hosts = std::string(name);
  line.key = key;
  // Line numbers of appended entries are not tracked (0); a later check() reports them as file:0.
  lines_.push_back(std::move(line));
}

std::string KnownHosts::add_or_remember(const std::string& file, std::string_view name,
                                        const HostKey& key) {
  try {
    add(file, name, key);
    return "";
  } catch (const Error& e) {
    remember(file, name, key);
    return e.what();
  }
}

bool first_unwritable_report(const std::string& file) {
  static std::mutex mu;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mu);
  return reported.insert(file).second;
}

}  // namespace hora::ssh
