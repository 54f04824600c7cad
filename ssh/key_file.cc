#include "ssh/key_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "ssh/errors.h"
#include "ssh/known_hosts.h"

namespace hora::ssh {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string pub_file_fingerprint(const std::string& path) {
  std::istringstream fields(read_first_line(path));
  std::string type, b64;
  fields >> type >> b64;
  try {
    return HostKey::from_base64(type, b64).fingerprint();
  } catch (const Error&) {
    return {};
  }
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// Whether a private key file is protected by a passphrase, judged from its text: OpenSSH's own
// format ("-----BEGIN OPENSSH PRIVATE KEY-----") names its cipher right after the magic
// "openssh-key-v1\0" in the base64 body ("none" when unencrypted); PEM keys carry a
// "Proc-Type: 4,ENCRYPTED" header; encrypted PKCS#8 keys begin "-----BEGIN ENCRYPTED PRIVATE
// KEY-----". hora has no terminal to ask for a passphrase and libssh2 cannot use such a key
// without one, so it is not offered to the server at all (which would also spend one of sshd's
// MaxAuthTries). False when the file is unreadable or not recognised: libssh2 then says what it
// makes of it.
bool key_file_is_encrypted(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::string body;  // the start of an OpenSSH key's base64, enough for the cipher name
  bool openssh = false;
  for (int n = 0; n < 64 && std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("-----BEGIN ENCRYPTED PRIVATE KEY-----", 0) == 0) return true;
    if (line.rfind("Proc-Type:", 0) == 0) return line.find("ENCRYPTED") != std::string::npos;
    if (line == "-----BEGIN OPENSSH PRIVATE KEY-----") {
      openssh = true;
    } else if (openssh) {
      if (line.rfind("-----END", 0) == 0 || body.size() >= 256) break;
      body += line;
    }
  }
  if (!openssh) return false;
  std::string raw;
  try {
    raw = base64_decode(body.substr(0, std::min<std::size_t>(body.size(), 256) / 4 * 4));
  } catch (const Error&) {
    return false;  // not base64 after all: let libssh2 report the file
  }
  static constexpr std::string_view kMagic("openssh-key-v1\0", 15);
  if (raw.size() < kMagic.size() + 4 || raw.compare(0, kMagic.size(), kMagic) != 0) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + kMagic.size();
  const std::size_t len =
      (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
  if (raw.size() < kMagic.size() + 4 + len) return false;
  return raw.compare(kMagic.size() + 4, len, "none") != 0;
}

}  // namespace hora::ssh
