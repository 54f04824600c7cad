// libFuzzer harness: the known_hosts parser (ssh/known_hosts.h). KnownHosts reads files and has
// no in-memory seam, so each input is written to a file in a private temporary directory:
//   line 1     the name looked up ("host", "[host]:2222", as known_hosts_name() makes them)
//   the rest   the known_hosts file
// Properties checked: reading never throws for a readable file (malformed lines are skipped);
// check() and known_types() agree (a type check() calls kKnown/kChanged is listed); the host key
// and base64 helpers either throw ssh::Error or round-trip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/scratch_dir.h"
#include "ssh/errors.h"
#include "ssh/known_hosts.h"

namespace ssh = hora::ssh;

namespace {

// Removed at exit by its destructor (libFuzzer ends with exit()); left behind after a crash.
const hora::fuzz::ScratchDir& scratch() {
  static const hora::fuzz::ScratchDir dir;
  return dir;
}

// An SSH wire-format key blob: string type, then one string of key material.
std::string blob(std::string_view type, std::string_view material) {
  auto put = [](std::string& out, std::string_view s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
    out += s;
  };
  std::string out;
  put(out, type);
  put(out, material);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = text.find('\n');
  const std::string_view name = text.substr(0, eol);
  const std::string_view contents =
      eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);

  const std::string file = scratch().write("known_hosts", contents);
  const ssh::KnownHosts known({file, scratch().path() + "/missing"});
  const std::vector<std::string> types = known.known_types(name);
  for (const std::string& type : types) {
    FUZZ_CHECK(std::count(types.begin(), types.end(), type) == 1);
  }
  for (const std::string& type : {std::string("ssh-ed25519"), std::string("ssh-rsa")}) {
    const ssh::HostKey key = ssh::HostKey::from_blob(blob(type, "fuzz key material"));
    FUZZ_CHECK(key.type == type);
    const ssh::KnownHosts::Lookup found = known.check(name, key);
    if (found.status == ssh::KnownHosts::Status::kKnown ||
        found.status == ssh::KnownHosts::Status::kChanged) {
      FUZZ_CHECK(std::find(types.begin(), types.end(), type) != types.end());
      FUZZ_CHECK(found.entry.file == file && found.entry.line >= 1);
    }
  }

  // The key helpers on the raw input.
  try {
    const ssh::HostKey key = ssh::HostKey::from_blob(std::string(text));
    FUZZ_CHECK(ssh::HostKey::from_base64(key.type, key.base64()) == key);
    (void)key.fingerprint();
  } catch (const ssh::Error&) {
  }
  FUZZ_CHECK(ssh::base64_decode(ssh::base64_encode(text)) == text);
  try {
    const std::string bytes = ssh::base64_decode(name);
    (void)ssh::base64_encode(bytes);
  } catch (const ssh::Error&) {
  }
  (void)ssh::known_hosts_name(name, size % 2 == 0 ? 22 : 2222);
  return 0;
}
