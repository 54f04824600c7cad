#include "cli/output/output.h"

#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "cli/base/errors.h"

namespace hora::cli {
namespace {

// A reader that takes nothing for this long is treated as gone.
constexpr int kStalledReaderMs = static_cast<int>(Output::kStalledReader.count());

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

// Pipes, FIFOs and terminals (character devices) can keep a writer waiting; regular files do
// not, and reopening one through /proc would lose O_APPEND and the offset.
bool may_block(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
}

// Writes what the non-blocking `fd` takes now. Returns the bytes written, or -1 when the
// descriptor is gone for good (EPIPE ...).
ssize_t write_some(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      return -1;
    }
  }
  return static_cast<ssize_t>(done);
}

// Waits up to `stall` for room on `fd` (or an error a write will report); false on timeout.
bool wait_writable(int fd, std::chrono::milliseconds stall) {
  pollfd p{fd, POLLOUT, 0};
  int r;
  while ((r = ::poll(&p, 1, static_cast<int>(stall.count()))) < 0 && errno == EINTR) {
  }
  return r > 0;
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

Output::Output(OutputOptions options, int nranks, int stdout_fd, int stderr_fd,
               boost::asio::io_context* io)
    : options_(std::move(options)), io_(io) {
  const int fds[2] = {stdout_fd, stderr_fd};
  for (int i = 0; i < 2; ++i) {
    Terminal& t = terminals_[i];
    t.fd = fds[i];
    if (io_ == nullptr || !may_block(fds[i])) continue;
    // A description of our own, so O_NONBLOCK does not reach the shell that shares ours.
    const std::string path = fmt::format("/proc/self/fd/{}", fds[i]);
    const int own = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (own < 0) continue;  // no /proc, or a FIFO without a reader: write directly, as before
    t.watch = std::make_unique<boost::asio::posix::stream_descriptor>(*io_, own);
    t.fd = own;
  }
  if (options_.directory.empty()) return;
  files_.reserve(static_cast<std::size_t>(nranks) * 2);
  // horovodrun's names: ranks zero-padded to the width of the largest (rank.07 of 12).
  const int width = static_cast<int>(std::to_string(std::max(nranks - 1, 0)).size());
  for (int r = 0; r < nranks; ++r) {
    const std::filesystem::path dir =
        std::filesystem::path(options_.directory) / fmt::format("rank.{:0{}}", r, width);
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
      line_start_.push_back(1);
    }
  }
}

Output::~Output() {
  // The normal path flushed already (cli/launch/launcher.cc); this bounds an exceptional one.
  flush(std::chrono::seconds(2));
  *alive_ = false;
}

std::size_t Output::pending(Stream stream) const {
  const Terminal& t = terminals_[static_cast<int>(stream)];
  return t.pending.size() - t.head;
}

void Output::write_pending(Terminal& t) {
  if (t.broken || t.head == t.pending.size()) return;
  const ssize_t n = write_some(t.fd, std::string_view(t.pending).substr(t.head));
  if (n < 0) {
    // A closed terminal or pipe must not end the job: stop writing there, keep the files.
    t.broken = true;
    t.pending.clear();
    t.head = 0;
    return;
  }
  t.head += static_cast<std::size_t>(n);
  if (t.head == t.pending.size()) {
    t.pending.clear();
    t.head = 0;
  } else if (t.head >= (1u << 20) && t.head * 2 >= t.pending.size()) {
    t.pending.erase(0, t.head);  // compact now and then, not on every write
    t.head = 0;
  }
}

void Output::arm(Terminal& t) {
  if (t.waiting || t.broken || t.head == t.pending.size()) return;
  t.waiting = true;
  t.watch->async_wait(boost::asio::posix::stream_descriptor::wait_write,
                      [this, &t,
                       alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
                        if (alive.expired()) return;
                        t.waiting = false;
                        if (ec) return;
                        write_pending(t);
                        arm(t);
                      });
}

void Output::write_terminal(Stream stream, std::string_view text) {
  Terminal& t = terminals_[static_cast<int>(stream)];
  if (t.broken) return;
  if (!t.watch) {
    // A closed terminal or pipe must not end the job: stop writing there, keep the files.
    if (!write_all(t.fd, text)) t.broken = true;
    return;
  }
  t.pending.append(text);
  write_pending(t);
  // Bounded memory: past kMaxPending the reader is waited for (the event loop with it) until
  // half of the queue is gone, or dropped as gone after kStalledReader without progress.
  if (t.pending.size() - t.head > kMaxPending) drain_to(t, kMaxPending / 2, kStalledReader);
  arm(t);
}

void Output::drain_to(Terminal& t, std::size_t left, std::chrono::milliseconds stall) {
  while (!t.broken && t.pending.size() - t.head > left) {
    if (!wait_writable(t.fd, stall)) {
      t.broken = true;  // the reader is gone: what it did not take is dropped
      t.pending.clear();
      t.head = 0;
      return;
    }
    write_pending(t);
  }
}

void Output::flush(std::chrono::milliseconds stall) {
  for (Terminal& t : terminals_) drain_to(t, 0, stall);
}

std::string Output::prefix(int rank, Stream stream) const {
  std::string out;
  if (options_.prefix_timestamp) out += timestamp();
  // Open MPI numbers its one job 1: `[1,RANK]`; horovodrun's tag is `[RANK]`.
  if (options_.tag_jobid) {
    out += fmt::format("[1,{}]<{}>:", rank, name_of(stream));
  } else {
    out += fmt::format("[{}]<{}>:", rank, name_of(stream));
  }
  return out;
}

void Output::line(int rank, Stream stream, std::string_view text) {
  std::string out;
  out.reserve(text.size() + 48);
  out += prefix(rank, stream);
  out += text;
  out += '\n';
  write_terminal(options_.merge_stderr ? Stream::kStdout : stream, out);
}

void Output::raw(int rank, Stream stream, std::string_view data) {
  // An elastic job's rank past the folders made at the start has no file (cli/launch/).
  if (files_.empty() || data.empty() || rank < 0 ||
      static_cast<std::size_t>(rank) * 2 + 1 >= files_.size()) {
    return;
  }
  const std::size_t index = static_cast<std::size_t>(rank) * 2 + static_cast<int>(stream);
  const UniqueFd& f = files_.at(index);
  // horovodrun's prefix_connection: each piece that ends at '\n' or '\r' is a line, and the
  // last piece without either gets its prefix too. Here the prefix (and its time) is written
  // when the line's first byte arrives, so a long line is never held back.
  std::string out;
  out.reserve(data.size() + 32);
  while (!data.empty()) {
    if (line_start_[index] != 0) out += prefix(rank, stream);
    const std::size_t end = data.find_first_of("\r\n");
    const std::size_t n = end == std::string_view::npos ? data.size() : end + 1;
    out.append(data.substr(0, n));
    line_start_[index] = end == std::string_view::npos ? 0 : 1;
    data.remove_prefix(n);
  }
  // A failing file (full disk) is ignored on purpose: the terminal still gets the lines, and
  // ending the job over a log file would be worse.
  write_all(f.get(), out);
}

void Output::launcher_text(std::string_view text) { write_terminal(Stream::kStderr, text); }

void Output::launcher_message(std::string_view message) {
  write_terminal(Stream::kStderr, fmt::format("horarun: {}\n", message));
}

}  // namespace hora::cli
