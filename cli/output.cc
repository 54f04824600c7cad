#include "cli/output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "cli/errors.h"

namespace hora::cli {
namespace {

// A reader that takes nothing for this long is treated as gone.
constexpr int kStalledReaderMs = 60000;

// Returns false when the descriptor is gone for good (EPIPE, EBADF ...) or its reader stalled.
// horarun's stdout may have been handed to it non-blocking (shared with a parent that set
// O_NONBLOCK): EAGAIN waits for room rather than dropping the line.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, kStalledReaderMs) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// asctime()'s layout, as horovodrun prints it: "Thu Nov 20 22:29:00 2025".
std::string timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return std::string(buf, n);
}

}  // namespace

const char* name_of(Stream stream) { return stream == Stream::kStdout ? "stdout" : "stderr"; }

Output::Output(OutputOptions options, int nranks, int stdout_fd, int stderr_fd)
    : options_(std::move(options)), fds_{stdout_fd, stderr_fd} {
  if (options_.directory.empty()) return;
  files_.reserve(static_cast<std::size_t>(nranks) * 2);
  for (int r = 0; r < nranks; ++r) {
    const std::filesystem::path dir =
        std::filesystem::path(options_.directory) / fmt::format("rank.{}", r);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      throw Error(fmt::format("--output-filename: cannot create directory {}: {}", dir.string(),
                              ec.message()));
    }
    for (Stream s : {Stream::kStdout, Stream::kStderr}) {
      const std::filesystem::path file = dir / name_of(s);
      int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        throw Error(fmt::format("--output-filename: cannot open {}: {}", file.string(),
                                std::strerror(errno)));
      }
      files_.emplace_back(fd);
    }
  }
}

void Output::write_terminal(Stream stream, std::string_view text) {
  const int i = static_cast<int>(stream);
  if (broken_[i]) return;
  // A closed terminal or pipe must not end the job: stop writing there, keep the files.
  if (!write_all(fds_[i], text)) broken_[i] = true;
}

void Output::line(int rank, Stream stream, std::string_view text) {
  std::string out;
  out.reserve(text.size() + 48);
  if (options_.prefix_timestamp) out += timestamp();
  out += fmt::format("[{}]<{}>:", rank, name_of(stream));
  out += text;
  out += '\n';
  write_terminal(stream, out);
  if (!files_.empty()) {
    const UniqueFd& f = files_.at(static_cast<std::size_t>(rank) * 2 + static_cast<int>(stream));
    std::string raw(text);
    raw += '\n';
    // A failing file (full disk) is ignored on purpose: the terminal copy above still has the
    // line, and ending the job over a log file would be worse.
    write_all(f.get(), raw);
  }
}

void Output::launcher_message(std::string_view message) {
  write_terminal(Stream::kStderr, fmt::format("horarun: {}\n", message));
}

}  // namespace hora::cli
