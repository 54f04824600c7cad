// Where ranks' output goes: horarun's stdout/stderr, each line prefixed `[rank]<stdout>:` or
// `[rank]<stderr>:` (horovodrun's format; with --prefix-output-with-timestamp the time comes
// first, as asctime() prints it), and with --output-filename DIR also DIR/rank.N/stdout and
// DIR/rank.N/stderr, written as horovodrun writes them (horovod/runner/gloo_run.py,
// safe_shell_exec.py): the rank's bytes with the same prefix before every line, a line ending
// at '\n' or '\r' (raw(): no '\n' added at 64 KiB pieces or after an unterminated last line).
//
// Lines are written whole, from the io_context thread only, so lines of different ranks never
// interleave within a line. A terminal or pipe that goes away (EPIPE) stops terminal output; the
// job itself carries on.
//
// A slow reader (a paused pager, `| slow-consumer`) must not freeze horarun: with an io_context,
// a terminal that is a pipe, FIFO or character device is reopened through /proc/self/fd as a
// separate non-blocking file description (the shell's own description keeps its flags), and
// what it does not take at once is queued and written when it is ready, so the event loop keeps
// serving the rendezvous and SIGINT. Only past kMaxPending queued bytes does line() wait for the
// reader (bounded memory; the ranks then wait on their pipes, as under mpirun). flush() writes
// what is queued before horarun exits. Regular files and sockets are written directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "common/unique_fd.h"

namespace hora::cli {

enum class Stream { kStdout = 0, kStderr = 1 };
const char* name_of(Stream stream);  // "stdout", "stderr"

struct OutputOptions {
  bool prefix_timestamp = false;
  std::string directory;      // --output-filename; empty: none
  bool tag_jobid = false;     // mpirun's --tag-output: `[1,RANK]<stdout>:` (Open MPI's form)
  bool merge_stderr = false;  // --merge-stderr-to-stdout: stderr lines to the stdout terminal
};

class Output {
 public:
  // Queued terminal output beyond which line() waits for the reader.
  static constexpr std::size_t kMaxPending = 16u << 20;
  // A reader that takes nothing for this long is treated as gone (its output is dropped).
  static constexpr std::chrono::milliseconds kStalledReader{60000};

  // Creates DIR/rank.N/ for every rank. Throws Error naming the path on failure. Without `io`
  // every terminal write completes before line() returns.
  Output(OutputOptions options, int nranks, int stdout_fd = 1, int stderr_fd = 2,
         boost::asio::io_context* io = nullptr);
  ~Output();  // flush(kStalledReader)
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // One line of a rank, without its '\n', for the terminal (prefixed, '\n' added).
  void line(int rank, Stream stream, std::string_view text);
  // Bytes of a rank as read from its pipe, before they are cut into lines: appended to
  // DIR/rank.N/<stream> with --output-filename, the prefix before each line; nothing otherwise.
  void raw(int rank, Stream stream, std::string_view data);

  // horarun's own message, to its stderr, as `horarun: <message>`.
  void launcher_message(std::string_view message);
  // A line of horarun's loggers, already formatted with its '\n' (cli/output/log_sink.h).
  void launcher_text(std::string_view text);

  // Writes everything queued, waiting for the readers; gives up on a stream whose reader takes
  // nothing for `stall` (its queue is dropped and it is written no more).
  void flush(std::chrono::milliseconds stall = kStalledReader);
  // Bytes queued for a terminal stream, not yet taken by its reader.
  std::size_t pending(Stream stream) const;

 private:
  struct Terminal {
    int fd = -1;  // where bytes go: the caller's descriptor, or `watch`'s when reopened
    // The reopened non-blocking description (owns it); null: writes go straight to `fd`.
    std::unique_ptr<boost::asio::posix::stream_descriptor> watch;
    std::string pending;  // bytes the reader has not taken yet, from `head` on
    std::size_t head = 0;
    bool waiting = false;  // an async wait for room is armed
    bool broken = false;
  };

  void write_terminal(Stream stream, std::string_view text);
  void write_pending(Terminal& t);  // writes what the descriptor takes now, never waits
  void arm(Terminal& t);
  // Waits (blocking) until at most `left` bytes are queued; gives the stream up after `stall`
  // without progress.
  void drain_to(Terminal& t, std::size_t left, std::chrono::milliseconds stall);

  OutputOptions options_;
  boost::asio::io_context* io_;
  Terminal terminals_[2];
  std::vector<UniqueFd> files_;  // 2 per rank: stdout, stderr
  // Per file: the next byte raw() writes starts a line (it gets the prefix first).
  std::vector<char> line_start_;
  std::string prefix(int rank, Stream stream) const;  // `[RANK]<stdout>:`, and its time
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace hora::cli
