// Cuts a byte stream into lines so that output of different ranks is only ever interleaved at
// line boundaries. One splitter per rank and stream; not thread-safe (used on the io_context
// thread).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace hora::cli {

class LineSplitter {
 public:
  // A "line" longer than this (a program printing without newlines) is passed on in pieces of
  // this size, so one rank cannot make the launcher buffer without bound. A '\n' that comes
  // right after a piece (a line of exactly k * max_line bytes) ends the line and passes nothing
  // on, whether it arrives in the same feed() or a later one.
  static constexpr std::size_t kDefaultMaxLine = 64 * 1024;

  // Receives each line without its '\n'.
  using Sink = std::function<void(std::string_view line)>;

  explicit LineSplitter(std::size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  // Passes every complete line in `data` (joined with what earlier calls left) to `sink`.
  void feed(std::string_view data, const Sink& sink);
  // End of stream: passes the unterminated rest, if any, as a last line.
  void finish(const Sink& sink);
  std::size_t buffered() const { return partial_.size(); }

 private:
  std::size_t max_line_;
  std::string partial_;
  // The last feed() ended exactly at a piece cut for length (nothing buffered since).
  bool cut_ = false;
};

}  // namespace hora::cli
