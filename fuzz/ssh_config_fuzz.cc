// libFuzzer harness: the ssh_config parser with Include (ssh/config.h, resolve()).
//
// The parser reads real files and has no in-memory seam, so every input is written to a private
// temporary directory that stands in for $HOME:
//   line 1                   the host as given to horarun ("alice@server2", "gpu7")
//   the rest                 $HOME/.ssh/config, the given file (--ssh-config)
//   after a line "%%file"    $HOME/.ssh/inc1, then inc2, inc3 (for `Include inc*` and friends)
// Includes must stay inside that directory: relative Include paths resolve under $HOME/.ssh, so
// an input that mentions "include" (any case) and also has a '/' or '~' is skipped: it could
// name a file elsewhere (/dev/zero, /proc, ~root/...).
// Properties checked: resolve() either throws ConfigError or returns a Target with a host name,
// a user, a port in 1..65535 and a positive connect timeout; it reads only files in that
// directory.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "fuzz/scratch_dir.h"
#include "ssh/config.h"
#include "ssh/errors.h"

namespace ssh = hora::ssh;

namespace {

constexpr std::string_view kFileSeparator = "\n%%file\n";
constexpr int kIncludeFiles = 3;

// Removed at exit by its destructor (libFuzzer ends with exit()); left behind after a crash.
const hora::fuzz::ScratchDir& home() {
  static const hora::fuzz::ScratchDir dir;
  return dir;
}

bool may_leave_home(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("include") != std::string::npos &&
         lower.find_first_of("/~") != std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string ssh_dir = home().path() + "/.ssh";
  std::filesystem::create_directory(ssh_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (may_leave_home(text)) return -1;  // -1: not added to the corpus
  const std::size_t eol = text.find('\n');
  const std::string_view host = text.substr(0, eol);
  text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);

  const hora::fuzz::ScratchDir& dir = home();
  for (int i = 0; i <= kIncludeFiles; ++i) {
    const std::string name = i == 0 ? ".ssh/config" : ".ssh/inc" + std::to_string(i);
    const std::size_t sep = text.find(kFileSeparator);
    if (i > 0 && text.empty()) {
      dir.remove(name);
      continue;
    }
    dir.write(name, text.substr(0, sep));
    text = sep == std::string_view::npos ? std::string_view()
                                         : text.substr(sep + kFileSeparator.size());
  }

  ssh::ConfigSource source;
  source.file = dir.path() + "/.ssh/config";
  source.system_file.clear();
  source.local = ssh::LocalIdentity{dir.path(), "fuzz", "1000", "node1.example.org"};
  try {
    const ssh::Target t = ssh::resolve(host, {}, source);
    FUZZ_CHECK(!t.alias.empty());
    FUZZ_CHECK(t.port >= 1 && t.port <= 65535);
    FUZZ_CHECK(t.connect_timeout.count() > 0);
    FUZZ_CHECK(!t.identity_files.empty());
    for (const std::string& f : t.config_files) {
      FUZZ_CHECK(f.rfind(dir.path() + "/", 0) == 0);
    }
    (void)t.endpoint();
    (void)t.describe();
  } catch (const ssh::ConfigError&) {
  }
  return 0;
}
