// Where ranks' output goes: horarun's stdout/stderr, each line prefixed `[rank]<stdout>:` or
// `[rank]<stderr>:` (horovodrun's format; with --prefix-output-with-timestamp the time comes
// first, as asctime() prints it), and with --output-filename DIR also DIR/rank.N/stdout and
// DIR/rank.N/stderr, which receive the rank's lines unprefixed.
//
// Each line is written with one write() loop to a blocking descriptor, from the io_context
// thread only, so lines of different ranks never interleave within a line. A terminal or pipe
// that goes away (EPIPE) stops terminal output; the job itself carries on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/unique_fd.h"

namespace hora::cli {

enum class Stream { kStdout = 0, kStderr = 1 };
const char* name_of(Stream stream);  // "stdout", "stderr"

struct OutputOptions {
  bool prefix_timestamp = false;
  std::string directory;  // --output-filename; empty: none
};

class Output {
 public:
  // Creates DIR/rank.N/ for every rank. Throws Error naming the path on failure.
  Output(OutputOptions options, int nranks, int stdout_fd = 1, int stderr_fd = 2);

  // One line of a rank, without its '\n'.
  void line(int rank, Stream stream, std::string_view text);

  // horarun's own message, to its stderr, as `horarun: <message>`.
  void launcher_message(std::string_view message);

 private:
  void write_terminal(Stream stream, std::string_view text);

  OutputOptions options_;
  int fds_[2];
  bool broken_[2] = {false, false};
  std::vector<UniqueFd> files_;  // 2 per rank: stdout, stderr
};

}  // namespace hora::cli
