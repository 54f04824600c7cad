// A small file named by a flag (--config-file, --ssh-config) and the checks it gets. Opened
// without blocking (a FIFO cannot hang horarun), only a regular file is accepted (a directory, a
// FIFO, a socket or a device is refused by name; /dev/null reads as an empty file);
// read_option_file reads at most `max_bytes` of it (/dev/zero or a huge file cannot grow horarun's
// memory), and no NUL bytes. Every error names the flag, the path and what to give instead.
// Header-only.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cli/base/errors.h"
#include "common/unique_fd.h"

namespace hora::cli {

// What a file named by a flag is, for a message: "a directory", "a FIFO", ...
inline const char* file_kind(mode_t mode) {
  return S_ISDIR(mode)                    ? "a directory"
         : S_ISFIFO(mode)                 ? "a FIFO"
         : S_ISSOCK(mode)                 ? "a socket"
         : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
                                          : "not a regular file";
}

// `path`, given with `flag`, opened for reading once it is known to be a regular file; `give`
// says what the flag wants ("horovodrun's YAML config file"). `open_failure` starts the message
// when it cannot be opened. Throws UsageError.
inline UniqueFd open_option_file(const char* flag, const std::string& path, const char* give,
                                 const char* open_failure = "cannot read the file") {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    throw UsageError(fmt::format("{} {}: {} ({}); check the path, and give {}", flag, path,
                                 open_failure, std::strerror(errno), give));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError(fmt::format("{} {}: is {}, not a regular file; give {}", flag, path,
                                 file_kind(st.st_mode), give));
  }
  return fd;
}

// The text of `path`, given with `flag` (open_option_file's checks, then at most `max_bytes`
// and no NUL bytes). Throws UsageError.
inline std::string read_option_file(const char* flag, const std::string& path,
                                    std::size_t max_bytes, const char* give) {
  if (path == "/dev/null") return {};
  UniqueFd fd = open_option_file(flag, path, give);
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UsageError(fmt::format("{} {}: cannot read the file ({}); give {}", flag, path,
                                   std::strerror(errno), give));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) {
      throw UsageError(
          fmt::format("{} {}: is larger than {} KiB; give {}", flag, path, max_bytes >> 10, give));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.find('\0') != std::string::npos) {
    throw UsageError(fmt::format("{} {}: contains NUL bytes, so it is not a text file; give {}",
                                 flag, path, give));
  }
  return text;
}

}  // namespace hora::cli
